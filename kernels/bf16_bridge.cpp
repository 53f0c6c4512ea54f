// bf16_bridge.cpp — the bfloat16 → float32 → bfloat16 wrapper of every backend function (see the header).
#include "kernels/bf16_bridge.h"

#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/binary_op.h"
#include "kernels/fused_args.h"

namespace tapegrad::kernels {
namespace {

bool is_bf16(const TensorView& v) { return v.dtype == DType::BFloat16; }

template <class... V>
bool any_bf16(const V&... views) {
  return (is_bf16(views) || ...);
}
// Every view that is present (data != nullptr: an output asked for, an input the rule reads) is bfloat16.
template <class... V>
bool present_bf16(const V&... views) {
  return ((views.data == nullptr || is_bf16(views)) && ...);
}
bool is_f32(const TensorView& v) { return v.dtype == DType::Float32; }
// Every view that is present is float32.
template <class... V>
bool present_f32(const V&... views) {
  return ((views.data == nullptr || is_f32(views)) && ...);
}

// The counters of one function of one bridge (Bf16BridgeStats::Counts, atomically).
struct AtomicCounts {
  std::atomic<uint64_t> widened_calls{0}, widened_bytes{0}, native_calls{0};
};

// The float32 scratch views of one call; frees them when it goes out of scope (also on an exception,
// in which case nothing is written back).
class Fp32Scratch {
 public:
  Fp32Scratch(Backend& inner, AtomicCounts& counts) : inner_(inner), counts_(counts) {
    counts_.widened_calls.fetch_add(1, std::memory_order_relaxed);
  }
  Fp32Scratch(const Fp32Scratch&) = delete;
  Fp32Scratch& operator=(const Fp32Scratch&) = delete;
  ~Fp32Scratch() {
    for (const Block& b : blocks_) inner_.deallocate(b.data, b.nbytes);
  }

  // A bfloat16 input as float32 (other dtypes pass through). Broadcast dims (stride 0) stay broadcast.
  TensorView in(const TensorView& v) { return is_bf16(v) ? widen(v, /*read=*/true) : v; }
  // A bfloat16 output: float32 scratch, rounded into v by write_back().
  TensorView out(const TensorView& v) {
    if (!is_bf16(v)) return v;
    if (v.data == nullptr) return {nullptr, DType::Float32, v.shape, v.strides};  // "not computed"
    TensorView s = widen(v, /*read=*/false);
    outputs_.push_back({v, s});
    return s;
  }
  // A bfloat16 view that is read and written.
  TensorView inout(const TensorView& v) {
    if (!is_bf16(v)) return v;
    TensorView s = widen(v, /*read=*/true);
    outputs_.push_back({v, s});
    return s;
  }
  void write_back() {
    for (const auto& [dst, src] : outputs_) inner_.copy(dst, src);
  }

 private:
  struct Block {
    void* data;
    size_t nbytes;
  };
  // A float32 view of v's shape over a fresh block: dims with stride 0 keep stride 0 and take one slot.
  TensorView widen(const TensorView& v, bool read) {
    Shape compact = v.shape;
    for (int d = 0; d < v.ndim(); ++d)
      if (v.strides[d] == 0) compact[d] = 1;
    const Shape packed = contiguous_strides(compact);
    Shape strides = packed;
    for (int d = 0; d < v.ndim(); ++d)
      if (v.strides[d] == 0) strides[d] = 0;
    const size_t nbytes = static_cast<size_t>(std::max<int64_t>(compact.numel(), 1)) * sizeof(float);
    void* data = inner_.allocate(nbytes);
    blocks_.push_back({data, nbytes});
    counts_.widened_bytes.fetch_add(nbytes, std::memory_order_relaxed);
    if (read && compact.numel() > 0)
      inner_.copy(TensorView{data, DType::Float32, compact, packed}, TensorView{v.data, v.dtype, compact, v.strides});
    return {data, DType::Float32, v.shape, strides};
  }

  Backend& inner_;
  AtomicCounts& counts_;
  std::vector<Block> blocks_;
  std::vector<std::pair<TensorView, TensorView>> outputs_;  // (bfloat16 destination, float32 scratch)
};

class Bf16Bridge final : public Backend {
 public:
  // pass_native: hand bfloat16 calls to the backend's own kernels where it has them (the bridge of
  // kernels::backend()); false: widen every one (bf16_widening_bridge, the reference).
  Bf16Bridge(Backend& inner, bool pass_native) : b_(inner), pass_native_(pass_native) {}
  Device device() const override { return b_.device(); }

  void* allocate(size_t nbytes) override { return b_.allocate(nbytes); }
  void deallocate(void* p, size_t nbytes) override { b_.deallocate(p, nbytes); }
  void copy_from_host(void* dst, const void* src, size_t n) override { b_.copy_from_host(dst, src, n); }
  void copy_to_host(void* dst, const void* src, size_t n) override { b_.copy_to_host(dst, src, n); }
  void copy_on_device(void* dst, const void* src, size_t n) override { b_.copy_on_device(dst, src, n); }
  void synchronize() override { b_.synchronize(); }
  bool matmul_bf16_native(const TensorView& out, const TensorView& a, const TensorView& b, bool acc) override {
    return b_.matmul_bf16_native(out, a, b, acc);
  }
  bool native_bf16(BackendFunction f) const override { return pass_native_ && b_.native_bf16(f); }

  // fill and copy store bfloat16 themselves.
  void fill(const TensorView& out, double value) override { b_.fill(out, value); }
  void copy(const TensorView& out, const TensorView& in) override { b_.copy(out, in); }

  void unary(UnaryOp op, const TensorView& out, const TensorView& in, double param) override {
    if (!any_bf16(out, in) || native(BackendFunction::Unary, present_bf16(out, in)))
      return b_.unary(op, out, in, param);
    Fp32Scratch s = scratch(BackendFunction::Unary);
    b_.unary(op, s.out(out), s.in(in), param);
    s.write_back();
  }
  void unary_backward(UnaryOp op, const TensorView& grad_in, const TensorView& grad_out, const TensorView& x,
                      const TensorView& y, double param) override {
    if (!any_bf16(grad_in, grad_out, x, y) ||
        native(BackendFunction::UnaryBackward, is_bf16(grad_in) && present_bf16(grad_out, x, y)))
      return b_.unary_backward(op, grad_in, grad_out, x, y, param);
    Fp32Scratch s = scratch(BackendFunction::UnaryBackward);
    // x or y may be absent (data == nullptr) when the rule does not read it.
    const TensorView xs = x.data ? s.in(x) : TensorView{nullptr, DType::Float32, x.shape, x.strides};
    const TensorView ys = y.data == x.data ? TensorView{xs.data, xs.dtype, y.shape, xs.strides}
                          : y.data ? s.in(y) : TensorView{nullptr, DType::Float32, y.shape, y.strides};
    b_.unary_backward(op, s.out(grad_in), s.in(grad_out), xs, ys, param);
    s.write_back();
  }
  void binary(BinaryOp op, const TensorView& out, const TensorView& a, const TensorView& b) override {
    const bool out_ok = is_comparison(op) ? out.dtype == DType::Bool : is_bf16(out);
    if (!any_bf16(out, a, b) || native(BackendFunction::Binary, out_ok && present_bf16(a, b)))
      return b_.binary(op, out, a, b);
    Fp32Scratch s = scratch(BackendFunction::Binary);
    b_.binary(op, s.out(out), s.in(a), s.in(b));
    s.write_back();
  }
  void where(const TensorView& out, const TensorView& cond, const TensorView& a, const TensorView& b) override {
    if (!any_bf16(out, a, b) || native(BackendFunction::Where, present_bf16(out, a, b)))
      return b_.where(out, cond, a, b);
    Fp32Scratch s = scratch(BackendFunction::Where);
    b_.where(s.out(out), cond, s.in(a), s.in(b));
    s.write_back();
  }

  void reduce(ReduceOp op, const TensorView& out, const TensorView& in) override {
    if (!any_bf16(out, in) || native(BackendFunction::Reduce, present_bf16(out, in))) return b_.reduce(op, out, in);
    Fp32Scratch s = scratch(BackendFunction::Reduce);
    b_.reduce(op, s.out(out), s.in(in));
    s.write_back();
  }
  void max_along(const TensorView& values, const TensorView& indices, const TensorView& in, int dim) override {
    if (!any_bf16(values, in) || native(BackendFunction::MaxAlong, present_bf16(values, in)))
      return b_.max_along(values, indices, in, dim);
    Fp32Scratch s = scratch(BackendFunction::MaxAlong);
    b_.max_along(s.out(values), indices, s.in(in), dim);
    s.write_back();
  }
  void softmax(const TensorView& out, const TensorView& in, int dim, bool log) override {
    if (!any_bf16(out, in) || native(BackendFunction::Softmax, present_bf16(out, in)))
      return b_.softmax(out, in, dim, log);
    Fp32Scratch s = scratch(BackendFunction::Softmax);
    b_.softmax(s.out(out), s.in(in), dim, log);
    s.write_back();
  }
  void softmax_backward(const TensorView& grad_in, const TensorView& grad_out, const TensorView& y, int dim,
                        bool log) override {
    if (!any_bf16(grad_in, grad_out, y) || native(BackendFunction::SoftmaxBackward, present_bf16(grad_in, grad_out, y)))
      return b_.softmax_backward(grad_in, grad_out, y, dim, log);
    Fp32Scratch s = scratch(BackendFunction::SoftmaxBackward);
    b_.softmax_backward(s.out(grad_in), s.in(grad_out), s.in(y), dim, log);
    s.write_back();
  }

  void matmul(const TensorView& out, const TensorView& a, const TensorView& b, bool accumulate) override {
    if (!any_bf16(out, a, b)) return b_.matmul(out, a, b, accumulate);
    // bf16 × bf16 into bf16, or into float32 (a gradient gathered in float32): the backend's own GEMM if it has one.
    const bool out_ok = is_bf16(out) || out.dtype == DType::Float32;
    if (pass_native_ && out_ok && is_bf16(a) && is_bf16(b) && b_.matmul_bf16_native(out, a, b, accumulate)) {
      count_native(BackendFunction::Matmul);
      return;
    }
    Fp32Scratch s = scratch(BackendFunction::Matmul);
    b_.matmul(accumulate ? s.inout(out) : s.out(out), s.in(a), s.in(b), accumulate);
    s.write_back();
  }

  void index_select(const TensorView& out, const TensorView& in, int dim, const TensorView& index) override {
    if (!any_bf16(out, in) || native(BackendFunction::IndexSelect, present_bf16(out, in)))
      return b_.index_select(out, in, dim, index);
    Fp32Scratch s = scratch(BackendFunction::IndexSelect);
    b_.index_select(s.out(out), s.in(in), dim, index);
    s.write_back();
  }
  // index_copy moves elements without arithmetic: every backend stores bfloat16 in it itself, as in copy.
  void index_copy(const TensorView& out, int dim, const TensorView& index, const TensorView& src) override {
    b_.index_copy(out, dim, index, src);
  }
  void index_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) override {
    if (!any_bf16(out, src) || native(BackendFunction::IndexAdd, present_bf16(out, src)))
      return b_.index_add(out, dim, index, src);
    Fp32Scratch s = scratch(BackendFunction::IndexAdd);
    b_.index_add(s.inout(out), dim, index, s.in(src));
    s.write_back();
  }
  void gather(const TensorView& out, const TensorView& in, int dim, const TensorView& index) override {
    if (!any_bf16(out, in) || native(BackendFunction::Gather, present_bf16(out, in)))
      return b_.gather(out, in, dim, index);
    Fp32Scratch s = scratch(BackendFunction::Gather);
    b_.gather(s.out(out), s.in(in), dim, index);
    s.write_back();
  }
  void scatter_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) override {
    if (!any_bf16(out, src) || native(BackendFunction::ScatterAdd, present_bf16(out, src)))
      return b_.scatter_add(out, dim, index, src);
    Fp32Scratch s = scratch(BackendFunction::ScatterAdd);
    b_.scatter_add(s.inout(out), dim, index, s.in(src));
    s.write_back();
  }

  // Natively: bfloat16 logits (and grad_logits), a float32 loss and grad_loss, the float64 lse.
  void cross_entropy(const TensorView& loss, const TensorView& lse, const TensorView& logits,
                     const TensorView& targets, int64_t ignore_index) override {
    if (!any_bf16(loss, logits) || native(BackendFunction::CrossEntropy, is_bf16(logits) && is_f32(loss)))
      return b_.cross_entropy(loss, lse, logits, targets, ignore_index);
    Fp32Scratch s = scratch(BackendFunction::CrossEntropy);
    b_.cross_entropy(s.out(loss), lse, s.in(logits), targets, ignore_index);
    s.write_back();
  }
  void cross_entropy_backward(const TensorView& grad_logits, const TensorView& grad_loss, const TensorView& logits,
                              const TensorView& targets, const TensorView& lse, int64_t ignore_index) override {
    if (!any_bf16(grad_logits, grad_loss, logits) ||
        native(BackendFunction::CrossEntropyBackward, is_bf16(grad_logits) && is_bf16(logits) && is_f32(grad_loss)))
      return b_.cross_entropy_backward(grad_logits, grad_loss, logits, targets, lse, ignore_index);
    Fp32Scratch s = scratch(BackendFunction::CrossEntropyBackward);
    b_.cross_entropy_backward(s.out(grad_logits), s.in(grad_loss), s.in(logits), targets, lse, ignore_index);
    s.write_back();
  }
  // Natively: bfloat16 x, weight, y and gradients, a float32 rstd.
  void rms_norm(const TensorView& y, const TensorView& rstd, const TensorView& x, const TensorView& weight,
                double eps) override {
    if (!any_bf16(y, rstd, x, weight) || native(BackendFunction::RmsNorm, present_bf16(y, x, weight) && is_f32(rstd)))
      return b_.rms_norm(y, rstd, x, weight, eps);
    Fp32Scratch s = scratch(BackendFunction::RmsNorm);
    b_.rms_norm(s.out(y), s.out(rstd), s.in(x), s.in(weight), eps);
    s.write_back();
  }
  void rms_norm_backward(const TensorView& grad_x, const TensorView& grad_weight, const TensorView& grad_y,
                         const TensorView& x, const TensorView& weight, const TensorView& rstd) override {
    if (!any_bf16(grad_x, grad_weight, grad_y, x, weight, rstd) ||
        native(BackendFunction::RmsNormBackward, present_bf16(grad_x, grad_weight, grad_y, x, weight) && is_f32(rstd)))
      return b_.rms_norm_backward(grad_x, grad_weight, grad_y, x, weight, rstd);
    Fp32Scratch s = scratch(BackendFunction::RmsNormBackward);
    b_.rms_norm_backward(s.out(grad_x), s.out(grad_weight), s.in(grad_y), s.in(x), s.in(weight), s.in(rstd));
    s.write_back();
  }
  // Natively: x, h, weight, branch, y bfloat16 with a float32 rstd; or x, h, weight, rstd float32 with a bfloat16
  // branch and/or y (the mixed-precision block: a bf16 branch in, a bf16 input for the next matmul out).
  void add_rms_norm(const TensorView& h, const TensorView& y, const TensorView& rstd, const TensorView& x,
                    const TensorView& branch, const TensorView& weight, double eps) override {
    const bool all_bf16 = present_bf16(h, x, weight, branch, y), f32_stream = is_f32(h) && is_f32(x) && is_f32(weight);
    if (!any_bf16(h, y, rstd, x, branch, weight) ||
        native(BackendFunction::AddRmsNorm, (all_bf16 || f32_stream) && is_f32(rstd)))
      return b_.add_rms_norm(h, y, rstd, x, branch, weight, eps);
    check_add_rms_norm_args("add_rms_norm", h, y, rstd, x, branch, weight);
    if (is_bf16(x)) {
      // The norm reads h as stored (rounded to bfloat16): the two functions in turn give exactly that.
      binary(BinaryOp::Add, h, x, branch);
      rms_norm(y, rstd, h, weight, eps);
      return;
    }
    Fp32Scratch s = scratch(BackendFunction::AddRmsNorm);
    b_.add_rms_norm(s.out(h), s.out(y), s.out(rstd), s.in(x), s.in(branch), s.in(weight), eps);
    s.write_back();
  }
  // Natively: every present tensor bfloat16 with a float32 rstd; or x, weight, rstd and the float gradients
  // float32 with a bfloat16 grad_y (the gradient of a bf16 y).
  void rms_norm_backward_add(const TensorView& grad_x, const TensorView& grad_weight, const TensorView& grad_y,
                             const TensorView& x, const TensorView& weight, const TensorView& rstd,
                             const TensorView& grad_residual) override {
    const bool all_bf16 = present_bf16(grad_x, grad_weight, grad_y, x, weight, grad_residual);
    const bool f32_stream = is_f32(x) && is_f32(weight) && present_f32(grad_x, grad_weight, grad_residual);
    if (!any_bf16(grad_x, grad_weight, grad_y, x, weight, rstd, grad_residual) ||
        native(BackendFunction::RmsNormBackwardAdd, (all_bf16 || f32_stream) && is_f32(rstd)))
      return b_.rms_norm_backward_add(grad_x, grad_weight, grad_y, x, weight, rstd, grad_residual);
    // grad_residual (which may be grad_x itself) is read into its scratch now, before anything is written.
    Fp32Scratch s = scratch(BackendFunction::RmsNormBackwardAdd);
    const TensorView residual = grad_residual.data ? s.in(grad_residual) : grad_residual;
    b_.rms_norm_backward_add(s.out(grad_x), s.out(grad_weight), s.in(grad_y), s.in(x), s.in(weight), s.in(rstd),
                             residual);
    s.write_back();
  }
  void swiglu(const TensorView& out, const TensorView& a, const TensorView& b) override {
    if (!any_bf16(out, a, b) || native(BackendFunction::Swiglu, present_bf16(out, a, b))) return b_.swiglu(out, a, b);
    Fp32Scratch s = scratch(BackendFunction::Swiglu);
    b_.swiglu(s.out(out), s.in(a), s.in(b));
    s.write_back();
  }
  void swiglu_backward(const TensorView& grad_a, const TensorView& grad_b, const TensorView& grad_out,
                       const TensorView& a, const TensorView& b) override {
    if (!any_bf16(grad_a, grad_b, grad_out, a, b) ||
        native(BackendFunction::SwigluBackward, present_bf16(grad_a, grad_b, grad_out, a, b)))
      return b_.swiglu_backward(grad_a, grad_b, grad_out, a, b);
    Fp32Scratch s = scratch(BackendFunction::SwigluBackward);
    b_.swiglu_backward(s.out(grad_a), s.out(grad_b), s.in(grad_out), s.in(a), s.in(b));
    s.write_back();
  }

  void rope(const TensorView& out, const TensorView& in, const TensorView& cos, const TensorView& sin,
            const TensorView& positions, bool inverse) override {
    if (!any_bf16(out, in, cos, sin) || native(BackendFunction::Rope, present_bf16(out, in, cos, sin)))
      return b_.rope(out, in, cos, sin, positions, inverse);
    Fp32Scratch s = scratch(BackendFunction::Rope);
    b_.rope(s.out(out), s.in(in), s.in(cos), s.in(sin), positions, inverse);
    s.write_back();
  }
  // Natively: bfloat16 q, k, v, out and gradients, a float32 lse.
  void causal_attention(const TensorView& out, const TensorView& lse, const TensorView& q, const TensorView& k,
                        const TensorView& v, double scale) override {
    if (!any_bf16(out, lse, q, k, v) ||
        native(BackendFunction::CausalAttention, present_bf16(out, q, k, v) && is_f32(lse)))
      return b_.causal_attention(out, lse, q, k, v, scale);
    Fp32Scratch s = scratch(BackendFunction::CausalAttention);
    b_.causal_attention(s.out(out), s.out(lse), s.in(q), s.in(k), s.in(v), scale);
    s.write_back();
  }
  void causal_attention_prefix(const TensorView& out, const TensorView& lse, const TensorView& q, const TensorView& k,
                               const TensorView& v, const TensorView& key_count, double scale) override {
    if (!any_bf16(out, lse, q, k, v) ||
        native(BackendFunction::CausalAttention, present_bf16(out, q, k, v) && is_f32(lse)))
      return b_.causal_attention_prefix(out, lse, q, k, v, key_count, scale);
    Fp32Scratch s = scratch(BackendFunction::CausalAttention);
    b_.causal_attention_prefix(s.out(out), s.out(lse), s.in(q), s.in(k), s.in(v), key_count, scale);
    s.write_back();
  }
  void causal_attention_backward(const TensorView& grad_q, const TensorView& grad_k, const TensorView& grad_v,
                                 const TensorView& grad_out, const TensorView& q, const TensorView& k,
                                 const TensorView& v, const TensorView& out, const TensorView& lse,
                                 double scale) override {
    if (!any_bf16(grad_q, grad_k, grad_v, grad_out, q, k, v, out, lse) ||
        native(BackendFunction::CausalAttentionBackward,
               present_bf16(grad_q, grad_k, grad_v, grad_out, q, k, v, out) && is_f32(lse)))
      return b_.causal_attention_backward(grad_q, grad_k, grad_v, grad_out, q, k, v, out, lse, scale);
    Fp32Scratch s = scratch(BackendFunction::CausalAttentionBackward);
    b_.causal_attention_backward(s.out(grad_q), s.out(grad_k), s.out(grad_v), s.in(grad_out), s.in(q), s.in(k),
                                 s.in(v), s.in(out), s.in(lse), scale);
    s.write_back();
  }

  void adamw_update(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                    const TensorView& exp_avg_sq, const AdamWStep& step) override {
    if (!any_bf16(param, grad, exp_avg, exp_avg_sq) ||
        native(BackendFunction::AdamW, present_bf16(param, grad, exp_avg, exp_avg_sq)))
      return b_.adamw_update(param, grad, exp_avg, exp_avg_sq, step);
    Fp32Scratch s = scratch(BackendFunction::AdamW);
    b_.adamw_update(s.inout(param), s.in(grad), s.inout(exp_avg), s.inout(exp_avg_sq), step);
    s.write_back();
  }
  void adamw_update_many(const std::vector<AdamWTensors>& tensors, const AdamWStep& step) override {
    bool any = false, all = true;
    for (const AdamWTensors& t : tensors) {
      any |= any_bf16(t.param, t.grad, t.exp_avg, t.exp_avg_sq);
      all &= present_bf16(t.param, t.grad, t.exp_avg, t.exp_avg_sq);
    }
    if (!any || native(BackendFunction::AdamW, all)) return b_.adamw_update_many(tensors, step);
    for (const AdamWTensors& t : tensors) adamw_update(t.param, t.grad, t.exp_avg, t.exp_avg_sq, step);
  }
  // Unbridged (a bfloat16 tensor makes the backend return false): CUDA graphs (kernels/device_graph.h).
  bool adamw_update_many_from_device(const std::vector<AdamWTensors>& t, const TensorView& step) override {
    return b_.adamw_update_many_from_device(t, step);
  }
  bool clip_grad_norm_native(const TensorView& norm, const std::vector<TensorView>& grads, double max_norm) override {
    return b_.clip_grad_norm_native(norm, grads, max_norm);  // float32 / float64 gradients only
  }
  bool sample_token(const TensorView& token, const TensorView& result, const TensorView& logits,
                    const TensorView& uniform, const TokenSampling& sampling) override {
    return b_.sample_token(token, result, logits, uniform, sampling);  // reads bfloat16 logits itself
  }
  bool begin_capture() override { return b_.begin_capture(); }
  std::unique_ptr<DeviceGraph> end_capture() override { return b_.end_capture(); }

  Bf16BridgeStats stats() const {
    Bf16BridgeStats s;
    for (size_t f = 0; f < counts_.size(); ++f) {
      s.by_function[f].widened_calls = counts_[f].widened_calls.load(std::memory_order_relaxed);
      s.by_function[f].widened_bytes = counts_[f].widened_bytes.load(std::memory_order_relaxed);
      s.by_function[f].native_calls = counts_[f].native_calls.load(std::memory_order_relaxed);
    }
    return s;
  }

 private:
  // True (and counted) when the wrapped backend takes this bfloat16 call itself: it has a kernel of its own
  // for f (Backend::native_bf16) and the call's operands are bfloat16 where that kernel takes bfloat16.
  bool native(BackendFunction f, bool bf16_where_expected) {
    if (!pass_native_ || !bf16_where_expected || !b_.native_bf16(f)) return false;
    count_native(f);
    return true;
  }
  void count_native(BackendFunction f) { counts(f).native_calls.fetch_add(1, std::memory_order_relaxed); }
  AtomicCounts& counts(BackendFunction f) { return counts_[static_cast<size_t>(f)]; }
  Fp32Scratch scratch(BackendFunction f) { return Fp32Scratch(b_, counts(f)); }

  Backend& b_;
  const bool pass_native_;
  std::array<AtomicCounts, kBackendFunctionCount> counts_;
};

// Every bridge made so far, by the backend it wraps (bridges live as long as the process).
struct BridgeRegistry {
  std::mutex mutex;
  std::map<Backend*, std::unique_ptr<Bf16Bridge>> bridges, widening_bridges;
};
BridgeRegistry& registry() {
  static BridgeRegistry r;
  return r;
}

}  // namespace

Backend& bf16_bridge(Backend& inner) {
  // kernels::backend() calls this for every op on a GPU: the last answer of this thread is kept, so the
  // lock is taken once per thread and device.
  thread_local Backend* last_inner = nullptr;
  thread_local Backend* last_bridge = nullptr;
  if (&inner == last_inner) return *last_bridge;
  BridgeRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::unique_ptr<Bf16Bridge>& b = r.bridges[&inner];
  if (!b) b = std::make_unique<Bf16Bridge>(inner, /*pass_native=*/true);
  last_inner = &inner, last_bridge = b.get();
  return *b;
}

Backend& bf16_widening_bridge(Backend& inner) {
  BridgeRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::unique_ptr<Bf16Bridge>& b = r.widening_bridges[&inner];
  if (!b) b = std::make_unique<Bf16Bridge>(inner, /*pass_native=*/false);
  return *b;
}

const char* backend_function_name(BackendFunction f) {
  static constexpr const char* kNames[] = {
      "unary", "unary_backward", "binary", "where", "reduce", "max_along", "softmax", "softmax_backward", "matmul",
      "index_select", "index_add", "gather", "scatter_add", "cross_entropy", "cross_entropy_backward", "rms_norm",
      "rms_norm_backward", "add_rms_norm", "rms_norm_backward_add", "swiglu", "swiglu_backward", "rope",
      "causal_attention", "causal_attention_backward",
      "adamw"};
  static_assert(std::size(kNames) == kBackendFunctionCount, "one name per BackendFunction");
  return kNames[static_cast<size_t>(f)];
}

Bf16BridgeStats::Counts Bf16BridgeStats::total() const {
  Counts t;
  for (const Counts& c : by_function) {
    t.widened_calls += c.widened_calls;
    t.widened_bytes += c.widened_bytes;
    t.native_calls += c.native_calls;
  }
  return t;
}

Bf16BridgeStats Bf16BridgeStats::since(const Bf16BridgeStats& earlier) const {
  Bf16BridgeStats d;
  for (size_t f = 0; f < by_function.size(); ++f) {
    d.by_function[f].widened_calls = by_function[f].widened_calls - earlier.by_function[f].widened_calls;
    d.by_function[f].widened_bytes = by_function[f].widened_bytes - earlier.by_function[f].widened_bytes;
    d.by_function[f].native_calls = by_function[f].native_calls - earlier.by_function[f].native_calls;
  }
  return d;
}

Bf16BridgeStats bf16_bridge_stats(Device device) {
  BridgeRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& [inner, bridge] : r.bridges)
    if (inner->device() == device) return bridge->stats();
  return {};
}

}  // namespace tapegrad::kernels
