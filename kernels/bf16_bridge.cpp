// bf16_bridge.cpp — the bfloat16 → float32 → bfloat16 wrapper of every backend function (see the header).
#include "kernels/bf16_bridge.h"

#include <map>
#include <mutex>
#include <vector>

namespace tapegrad::kernels {
namespace {

bool is_bf16(const TensorView& v) { return v.dtype == DType::BFloat16; }

template <class... V>
bool any_bf16(const V&... views) {
  return (is_bf16(views) || ...);
}

// The float32 scratch views of one call; frees them when it goes out of scope (also on an exception,
// in which case nothing is written back).
class Fp32Scratch {
 public:
  explicit Fp32Scratch(Backend& inner) : inner_(inner) {}
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
    if (read && compact.numel() > 0)
      inner_.copy(TensorView{data, DType::Float32, compact, packed}, TensorView{v.data, v.dtype, compact, v.strides});
    return {data, DType::Float32, v.shape, strides};
  }

  Backend& inner_;
  std::vector<Block> blocks_;
  std::vector<std::pair<TensorView, TensorView>> outputs_;  // (bfloat16 destination, float32 scratch)
};

class Bf16Bridge final : public Backend {
 public:
  explicit Bf16Bridge(Backend& inner) : b_(inner) {}
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

  // fill and copy store bfloat16 themselves.
  void fill(const TensorView& out, double value) override { b_.fill(out, value); }
  void copy(const TensorView& out, const TensorView& in) override { b_.copy(out, in); }

  void unary(UnaryOp op, const TensorView& out, const TensorView& in, double param) override {
    if (!any_bf16(out, in)) return b_.unary(op, out, in, param);
    Fp32Scratch s(b_);
    b_.unary(op, s.out(out), s.in(in), param);
    s.write_back();
  }
  void unary_backward(UnaryOp op, const TensorView& grad_in, const TensorView& grad_out, const TensorView& x,
                      const TensorView& y, double param) override {
    if (!any_bf16(grad_in, grad_out, x, y)) return b_.unary_backward(op, grad_in, grad_out, x, y, param);
    Fp32Scratch s(b_);
    // x or y may be absent (data == nullptr) when the rule does not read it.
    const TensorView xs = x.data ? s.in(x) : TensorView{nullptr, DType::Float32, x.shape, x.strides};
    const TensorView ys = y.data == x.data ? TensorView{xs.data, xs.dtype, y.shape, xs.strides}
                          : y.data ? s.in(y) : TensorView{nullptr, DType::Float32, y.shape, y.strides};
    b_.unary_backward(op, s.out(grad_in), s.in(grad_out), xs, ys, param);
    s.write_back();
  }
  void binary(BinaryOp op, const TensorView& out, const TensorView& a, const TensorView& b) override {
    if (!any_bf16(out, a, b)) return b_.binary(op, out, a, b);
    Fp32Scratch s(b_);
    b_.binary(op, s.out(out), s.in(a), s.in(b));
    s.write_back();
  }
  void where(const TensorView& out, const TensorView& cond, const TensorView& a, const TensorView& b) override {
    if (!any_bf16(out, a, b)) return b_.where(out, cond, a, b);
    Fp32Scratch s(b_);
    b_.where(s.out(out), cond, s.in(a), s.in(b));
    s.write_back();
  }

  void reduce(ReduceOp op, const TensorView& out, const TensorView& in) override {
    if (!any_bf16(out, in)) return b_.reduce(op, out, in);
    Fp32Scratch s(b_);
    b_.reduce(op, s.out(out), s.in(in));
    s.write_back();
  }
  void max_along(const TensorView& values, const TensorView& indices, const TensorView& in, int dim) override {
    if (!any_bf16(values, in)) return b_.max_along(values, indices, in, dim);
    Fp32Scratch s(b_);
    b_.max_along(s.out(values), indices, s.in(in), dim);
    s.write_back();
  }
  void softmax(const TensorView& out, const TensorView& in, int dim, bool log) override {
    if (!any_bf16(out, in)) return b_.softmax(out, in, dim, log);
    Fp32Scratch s(b_);
    b_.softmax(s.out(out), s.in(in), dim, log);
    s.write_back();
  }
  void softmax_backward(const TensorView& grad_in, const TensorView& grad_out, const TensorView& y, int dim,
                        bool log) override {
    if (!any_bf16(grad_in, grad_out, y)) return b_.softmax_backward(grad_in, grad_out, y, dim, log);
    Fp32Scratch s(b_);
    b_.softmax_backward(s.out(grad_in), s.in(grad_out), s.in(y), dim, log);
    s.write_back();
  }

  void matmul(const TensorView& out, const TensorView& a, const TensorView& b, bool accumulate) override {
    if (!any_bf16(out, a, b)) return b_.matmul(out, a, b, accumulate);
    if (is_bf16(out) && is_bf16(a) && is_bf16(b) && b_.matmul_bf16_native(out, a, b, accumulate)) return;
    Fp32Scratch s(b_);
    b_.matmul(accumulate ? s.inout(out) : s.out(out), s.in(a), s.in(b), accumulate);
    s.write_back();
  }

  void index_select(const TensorView& out, const TensorView& in, int dim, const TensorView& index) override {
    if (!any_bf16(out, in)) return b_.index_select(out, in, dim, index);
    Fp32Scratch s(b_);
    b_.index_select(s.out(out), s.in(in), dim, index);
    s.write_back();
  }
  void index_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) override {
    if (!any_bf16(out, src)) return b_.index_add(out, dim, index, src);
    Fp32Scratch s(b_);
    b_.index_add(s.inout(out), dim, index, s.in(src));
    s.write_back();
  }
  void gather(const TensorView& out, const TensorView& in, int dim, const TensorView& index) override {
    if (!any_bf16(out, in)) return b_.gather(out, in, dim, index);
    Fp32Scratch s(b_);
    b_.gather(s.out(out), s.in(in), dim, index);
    s.write_back();
  }
  void scatter_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) override {
    if (!any_bf16(out, src)) return b_.scatter_add(out, dim, index, src);
    Fp32Scratch s(b_);
    b_.scatter_add(s.inout(out), dim, index, s.in(src));
    s.write_back();
  }

  void cross_entropy(const TensorView& loss, const TensorView& lse, const TensorView& logits,
                     const TensorView& targets, int64_t ignore_index) override {
    if (!any_bf16(loss, logits)) return b_.cross_entropy(loss, lse, logits, targets, ignore_index);
    Fp32Scratch s(b_);
    b_.cross_entropy(s.out(loss), lse, s.in(logits), targets, ignore_index);
    s.write_back();
  }
  void cross_entropy_backward(const TensorView& grad_logits, const TensorView& grad_loss, const TensorView& logits,
                              const TensorView& targets, const TensorView& lse, int64_t ignore_index) override {
    if (!any_bf16(grad_logits, grad_loss, logits))
      return b_.cross_entropy_backward(grad_logits, grad_loss, logits, targets, lse, ignore_index);
    Fp32Scratch s(b_);
    b_.cross_entropy_backward(s.out(grad_logits), s.in(grad_loss), s.in(logits), targets, lse, ignore_index);
    s.write_back();
  }
  void rms_norm(const TensorView& y, const TensorView& rstd, const TensorView& x, const TensorView& weight,
                double eps) override {
    if (!any_bf16(y, rstd, x, weight)) return b_.rms_norm(y, rstd, x, weight, eps);
    Fp32Scratch s(b_);
    b_.rms_norm(s.out(y), s.out(rstd), s.in(x), s.in(weight), eps);
    s.write_back();
  }
  void rms_norm_backward(const TensorView& grad_x, const TensorView& grad_weight, const TensorView& grad_y,
                         const TensorView& x, const TensorView& weight, const TensorView& rstd) override {
    if (!any_bf16(grad_x, grad_weight, grad_y, x, weight, rstd))
      return b_.rms_norm_backward(grad_x, grad_weight, grad_y, x, weight, rstd);
    Fp32Scratch s(b_);
    b_.rms_norm_backward(s.out(grad_x), s.out(grad_weight), s.in(grad_y), s.in(x), s.in(weight), s.in(rstd));
    s.write_back();
  }
  void swiglu(const TensorView& out, const TensorView& a, const TensorView& b) override {
    if (!any_bf16(out, a, b)) return b_.swiglu(out, a, b);
    Fp32Scratch s(b_);
    b_.swiglu(s.out(out), s.in(a), s.in(b));
    s.write_back();
  }
  void swiglu_backward(const TensorView& grad_a, const TensorView& grad_b, const TensorView& grad_out,
                       const TensorView& a, const TensorView& b) override {
    if (!any_bf16(grad_a, grad_b, grad_out, a, b)) return b_.swiglu_backward(grad_a, grad_b, grad_out, a, b);
    Fp32Scratch s(b_);
    b_.swiglu_backward(s.out(grad_a), s.out(grad_b), s.in(grad_out), s.in(a), s.in(b));
    s.write_back();
  }

  void rope(const TensorView& out, const TensorView& in, const TensorView& cos, const TensorView& sin,
            const TensorView& positions, bool inverse) override {
    if (!any_bf16(out, in, cos, sin)) return b_.rope(out, in, cos, sin, positions, inverse);
    Fp32Scratch s(b_);
    b_.rope(s.out(out), s.in(in), s.in(cos), s.in(sin), positions, inverse);
    s.write_back();
  }
  void causal_attention(const TensorView& out, const TensorView& lse, const TensorView& q, const TensorView& k,
                        const TensorView& v, double scale) override {
    if (!any_bf16(out, lse, q, k, v)) return b_.causal_attention(out, lse, q, k, v, scale);
    Fp32Scratch s(b_);
    b_.causal_attention(s.out(out), s.out(lse), s.in(q), s.in(k), s.in(v), scale);
    s.write_back();
  }
  void causal_attention_backward(const TensorView& grad_q, const TensorView& grad_k, const TensorView& grad_v,
                                 const TensorView& grad_out, const TensorView& q, const TensorView& k,
                                 const TensorView& v, const TensorView& out, const TensorView& lse,
                                 double scale) override {
    if (!any_bf16(grad_q, grad_k, grad_v, grad_out, q, k, v, out, lse))
      return b_.causal_attention_backward(grad_q, grad_k, grad_v, grad_out, q, k, v, out, lse, scale);
    Fp32Scratch s(b_);
    b_.causal_attention_backward(s.out(grad_q), s.out(grad_k), s.out(grad_v), s.in(grad_out), s.in(q), s.in(k),
                                 s.in(v), s.in(out), s.in(lse), scale);
    s.write_back();
  }

  void adamw_update(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                    const TensorView& exp_avg_sq, const AdamWStep& step) override {
    if (!any_bf16(param, grad, exp_avg, exp_avg_sq)) return b_.adamw_update(param, grad, exp_avg, exp_avg_sq, step);
    Fp32Scratch s(b_);
    b_.adamw_update(s.inout(param), s.in(grad), s.inout(exp_avg), s.inout(exp_avg_sq), step);
    s.write_back();
  }
  void adamw_update_many(const std::vector<AdamWTensors>& tensors, const AdamWStep& step) override {
    bool any = false;
    for (const AdamWTensors& t : tensors) any |= any_bf16(t.param, t.grad, t.exp_avg, t.exp_avg_sq);
    if (!any) return b_.adamw_update_many(tensors, step);
    for (const AdamWTensors& t : tensors) adamw_update(t.param, t.grad, t.exp_avg, t.exp_avg_sq, step);
  }

 private:
  Backend& b_;
};

}  // namespace

Backend& bf16_bridge(Backend& inner) {
  // kernels::backend() calls this for every op on a GPU: the last answer of this thread is kept, so the
  // lock is taken once per thread and device (bridges live as long as the process).
  thread_local Backend* last_inner = nullptr;
  thread_local Backend* last_bridge = nullptr;
  if (&inner == last_inner) return *last_bridge;
  static std::mutex mutex;
  static std::map<Backend*, std::unique_ptr<Bf16Bridge>> bridges;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Bf16Bridge>& b = bridges[&inner];
  if (!b) b = std::make_unique<Bf16Bridge>(inner);
  last_inner = &inner, last_bridge = b.get();
  return *b;
}

}  // namespace tapegrad::kernels
