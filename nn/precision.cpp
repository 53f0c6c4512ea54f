// precision.cpp — the mixed-precision policy table and the thread's active precision.
#include "nn/precision.h"

#include "autograd/grad_mode.h"
#include "autograd/storage.h"

namespace tapegrad::nn {
namespace {

thread_local Precision g_precision = Precision::FP32;
thread_local int g_cast_cache_guards = 0;

// Row: stage; column: the dtype under BF16. FP32 and TF32 compute every stage in float32.
struct PolicyRow {
  Stage stage;
  DType under_bf16;
};
constexpr PolicyRow kPolicy[] = {
    {Stage::Matmul, DType::BFloat16},   {Stage::Attention, DType::BFloat16}, {Stage::Residual, DType::Float32},
    {Stage::Norm, DType::Float32},      {Stage::Embedding, DType::Float32},  {Stage::Loss, DType::Float32},
};

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::BF16: return "bf16";
  }
  return "?";
}

Precision parse_precision(const std::string& s, const char* what) {
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16})
    if (s == precision_name(p)) return p;
  throw Error(fmt::format("{}: '{}' is not a precision (expected fp32, tf32 or bf16)", what, s));
}

Precision current_precision() { return g_precision; }

PrecisionGuard::PrecisionGuard(Precision p) : previous_(g_precision) { g_precision = p; }
PrecisionGuard::~PrecisionGuard() { g_precision = previous_; }

DType stage_dtype(Stage stage) {
  if (g_precision != Precision::BF16) return kFloat32;
  for (const PolicyRow& row : kPolicy)
    if (row.stage == stage) return row.under_bf16;
  throw Error("precision: a stage without a row in the policy table (nn/precision.cpp)");
}

Tensor autocast(const Tensor& x, Stage stage) {
  if (!x.defined() || x.dtype() != kFloat32) return x;
  const DType want = stage_dtype(stage);
  return want == kFloat32 ? x : x.to(want);
}

bool CopiedFrom::matches(const Tensor& w) const {
  const std::shared_ptr<Storage>& st = w.storage();
  return storage_.lock() == st && version_ == st->version() && offset_ == w.offset() && shape_ == w.shape() &&
         strides_ == w.strides();
}

void CopiedFrom::set(const Tensor& w) {
  storage_ = w.storage(), version_ = w.storage()->version(), offset_ = w.offset(), shape_ = w.shape();
  strides_ = w.strides();
}

namespace {

// Whether a converted copy of w may be kept now (see WeightCast).
bool may_keep_copy(const Tensor& w) {
  return g_cast_cache_guards > 0 && !(GradMode::enabled() && w.defined() && w.requires_grad());
}

}  // namespace

Tensor WeightCast::operator()(const Tensor& w, Stage stage) const {
  const bool cache = may_keep_copy(w);
  if (!cache) cast_ = Tensor(), source_ = CopiedFrom();
  if (!w.defined() || w.dtype() != kFloat32) return w;
  const DType want = stage_dtype(stage);
  if (want == kFloat32) return w;
  if (!cache) return w.to(want);
  if (cast_.defined() && cast_.dtype() == want && source_.matches(w)) return cast_;
  NoGradGuard no_grad;
  cast_ = w.to(want);
  source_.set(w);
  return cast_;
}

Tensor StackedWeightCast::operator()(const std::vector<Tensor>& weights, Stage stage) const {
  const DType want = stage_dtype(stage);
  bool applies = want != kFloat32 && !weights.empty();
  for (const Tensor& w : weights)
    applies = applies && w.defined() && w.dtype() == kFloat32 && may_keep_copy(w) && w.dim() == 2 &&
              w.size(1) == weights.front().size(1) && w.device() == weights.front().device();
  if (!applies) {
    stacked_ = Tensor(), sources_.clear();
    return Tensor();
  }
  bool same = stacked_.defined() && stacked_.dtype() == want && sources_.size() == weights.size();
  for (size_t i = 0; same && i < weights.size(); ++i) same = sources_[i].matches(weights[i]);
  if (same) return stacked_;
  NoGradGuard no_grad;
  stacked_ = cat(weights, 0).to(want);  // rows of each weight converted as WeightCast converts them
  sources_.assign(weights.size(), CopiedFrom());
  for (size_t i = 0; i < weights.size(); ++i) sources_[i].set(weights[i]);
  return stacked_;
}

CastCacheGuard::CastCacheGuard() { ++g_cast_cache_guards; }
CastCacheGuard::~CastCacheGuard() { --g_cast_cache_guards; }

Tensor add_residual(const Tensor& x, const Tensor& branch) {
  return x + (branch.dtype() == x.dtype() ? branch : branch.to(x.dtype()));
}

}  // namespace tapegrad::nn
