// rmsnorm.cpp — RMSNorm: the fused rms_norm op (autograd/ops/fused.cpp; add_rms_norm with the residual add
// before it), and its composition (mean, rsqrt, mul) kept as the reference.
#include "nn/rmsnorm.h"

#include "autograd/ops_from_table.h"
#include "nn/precision.h"

namespace tapegrad::nn {

RMSNorm::RMSNorm(int64_t d, double e, DType dtype, bool g) : d_model(d), eps(e), gain(g) {
  TG_CHECK(d > 0, "RMSNorm: d_model must be positive, got {}", d);
  weight = gain ? register_parameter("weight", ones({d}, dtype))
                : register_buffer("weight", ones({d}, dtype), /*persistent=*/false);
}

namespace {

void check_input(const Tensor& x, int64_t d_model) {
  TG_CHECK(x.dim() >= 1 && x.size(-1) == d_model, "RMSNorm: input {} must end in d_model = {}", x.shape(), d_model);
  TG_CHECK(is_floating(x.dtype()), "RMSNorm: input must be float32, float64 or bfloat16, got {}", x.dtype());
}

}  // namespace

Tensor RMSNorm::forward(const Tensor& x) const {
  check_input(x, d_model);
  Tensor w = weight.dtype() == x.dtype() ? weight : weight.to(x.dtype());
  return rms_norm(x, w, eps);  // y = x·r·w, r = 1/sqrt(mean(x²) + eps) per row
}

ResidualNorm RMSNorm::forward_add(const Tensor& x, const Tensor& branch) const {
  check_input(x, d_model);
  Tensor w = weight.dtype() == x.dtype() ? weight : weight.to(x.dtype());
  const DType normed = x.dtype() == kFloat32 ? stage_dtype(Stage::Matmul) : x.dtype();
  // A bf16 branch next to a float32 stream is widened inside the fused add; other mixes are converted first.
  const bool as_is = !branch.defined() || branch.dtype() == x.dtype() ||
                     (branch.dtype() == kBFloat16 && x.dtype() == kFloat32);
  return add_rms_norm(x, as_is ? branch : branch.to(x.dtype()), w, eps, normed);
}

Tensor RMSNorm::forward_reference(const Tensor& x) const {
  check_input(x, d_model);
  Tensor ms = mean(x * x, {-1}, /*keepdim=*/true);  // [..., 1] = mean over C of x²
  Tensor w = weight.dtype() == x.dtype() ? weight : weight.to(x.dtype());
  return x * rsqrt(ms + eps) * w;                   // [..., C]
}

}  // namespace tapegrad::nn
