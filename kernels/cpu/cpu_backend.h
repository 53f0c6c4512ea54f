// cpu_backend.h — the CPU backend: OpenBLAS for matmul, our own OpenMP kernels for the rest.
// Its methods are defined by family: allocator.cpp, elementwise.cpp, reduce.cpp, softmax.cpp,
// matmul.cpp, index.cpp.
#pragma once
#include "kernels/backend.h"

namespace tapegrad::kernels::cpu {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu(); }

  void* allocate(size_t nbytes) override;
  void deallocate(void* p, size_t nbytes) override;
  void copy_from_host(void* dst, const void* src, size_t nbytes) override;
  void copy_to_host(void* dst, const void* src, size_t nbytes) override;
  void copy_on_device(void* dst, const void* src, size_t nbytes) override;

  void fill(const TensorView& out, double value) override;
  void copy(const TensorView& out, const TensorView& in) override;
  void unary(UnaryOp op, const TensorView& out, const TensorView& in, double param) override;
  void unary_backward(UnaryOp op, const TensorView& grad_in, const TensorView& grad_out, const TensorView& x,
                      const TensorView& y, double param) override;
  void binary(BinaryOp op, const TensorView& out, const TensorView& a, const TensorView& b) override;
  void where(const TensorView& out, const TensorView& cond, const TensorView& a, const TensorView& b) override;

  void reduce(ReduceOp op, const TensorView& out, const TensorView& in) override;
  void max_along(const TensorView& values, const TensorView& indices, const TensorView& in, int dim) override;
  void softmax(const TensorView& out, const TensorView& in, int dim, bool log) override;
  void softmax_backward(const TensorView& grad_in, const TensorView& grad_out, const TensorView& y, int dim,
                        bool log) override;

  void matmul(const TensorView& out, const TensorView& a, const TensorView& b, bool accumulate) override;

  void index_select(const TensorView& out, const TensorView& in, int dim, const TensorView& index) override;
  void index_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) override;
  void gather(const TensorView& out, const TensorView& in, int dim, const TensorView& index) override;
  void scatter_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) override;
  void index_copy(const TensorView& out, int dim, const TensorView& index, const TensorView& src) override;

  // Fused Transformer kernels (cross-entropy, RMSNorm, SwiGLU): fused_cross_entropy.cpp,
  // fused_rmsnorm.cpp, fused_swiglu.cpp.
  void cross_entropy(const TensorView& loss, const TensorView& lse, const TensorView& logits,
                     const TensorView& targets, int64_t ignore_index) override;
  void cross_entropy_backward(const TensorView& grad_logits, const TensorView& grad_loss, const TensorView& logits,
                              const TensorView& targets, const TensorView& lse, int64_t ignore_index) override;
  void rms_norm(const TensorView& y, const TensorView& rstd, const TensorView& x, const TensorView& weight,
                double eps) override;
  void rms_norm_backward(const TensorView& grad_x, const TensorView& grad_weight, const TensorView& grad_y,
                         const TensorView& x, const TensorView& weight, const TensorView& rstd) override;
  void add_rms_norm(const TensorView& h, const TensorView& y, const TensorView& rstd, const TensorView& x,
                    const TensorView& branch, const TensorView& weight, double eps) override;
  void rms_norm_backward_add(const TensorView& grad_x, const TensorView& grad_weight, const TensorView& grad_y,
                             const TensorView& x, const TensorView& weight, const TensorView& rstd,
                             const TensorView& grad_residual) override;
  void swiglu(const TensorView& out, const TensorView& a, const TensorView& b) override;
  void swiglu_backward(const TensorView& grad_a, const TensorView& grad_b, const TensorView& grad_out,
                       const TensorView& a, const TensorView& b) override;

  // Fused attention and RoPE: fused_attention.cpp, fused_rope.cpp.
  void rope(const TensorView& out, const TensorView& in, const TensorView& cos, const TensorView& sin,
            const TensorView& positions, bool inverse) override;
  void causal_attention(const TensorView& out, const TensorView& lse, const TensorView& q, const TensorView& k,
                        const TensorView& v, double scale) override;
  void causal_attention_prefix(const TensorView& out, const TensorView& lse, const TensorView& q, const TensorView& k,
                               const TensorView& v, const TensorView& key_count, double scale) override;
  void causal_attention_backward(const TensorView& grad_q, const TensorView& grad_k, const TensorView& grad_v,
                                 const TensorView& grad_out, const TensorView& q, const TensorView& k,
                                 const TensorView& v, const TensorView& out, const TensorView& lse,
                                 double scale) override;
  // Optimizer kernels: fused_adamw.cpp.
  void adamw_update(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                    const TensorView& exp_avg_sq, const AdamWStep& step) override;
};

CpuBackend& cpu_backend();

// Bytes the CPU caching allocator holds for reuse, and gives them back to the system.
size_t cpu_cached_bytes();
void cpu_empty_cache();
// Blocks the CPU allocator has requested from the system since the start (cache misses): a loop that
// reuses its buffers — a decoding step after the first — adds none.
uint64_t cpu_system_allocations();

}  // namespace tapegrad::kernels::cpu
