// swiglu.h — SwiGLU feed-forward: y = w2(silu(w1 x) ⊙ w3 x), w1, w3 [F, C], w2 [C, F], no biases.
// Default F = 8/3 · C rounded up to a multiple of 64 (CS336 / Llama).
#pragma once
#include "nn/block_ffn.h"

namespace tapegrad::nn {

// w1, w2, w3 (BlockFFN's): gate, down, up (Hugging Face: gate_proj, down_proj, up_proj).
class SwiGLU : public BlockFFN {
 public:
  // d_ff ≤ 0 picks default_d_ff(d_model).
  SwiGLU(int64_t d_model, int64_t d_ff = 0, DType dtype = kFloat32, Generator* gen = nullptr);
  // x [..., C] → [..., C]
  Tensor forward(const Tensor& x) const override;
  // The gate as the composition silu(w1 x) * w3 x: forward's reference.
  Tensor forward_reference(const Tensor& x) const override;
  FFNKind kind() const override { return FFNKind::SwiGLU; }
  static int64_t default_d_ff(int64_t d_model);

 private:
  StackedWeightCast w13_cast_;  // [W1; W3] in bf16 while generating under bf16 precision (one matmul)
};

}  // namespace tapegrad::nn
