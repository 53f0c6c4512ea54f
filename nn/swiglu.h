// swiglu.h — SwiGLU feed-forward: y = w2(silu(w1 x) ⊙ w3 x), w1, w3 [F, C], w2 [C, F], no biases.
// Default F = 8/3 · C rounded up to a multiple of 64 (CS336 / Llama).
#pragma once
#include "nn/linear.h"

namespace tapegrad::nn {

class SwiGLU : public Module {
 public:
  // d_ff ≤ 0 picks default_d_ff(d_model).
  SwiGLU(int64_t d_model, int64_t d_ff = 0, DType dtype = kFloat32, Generator* gen = nullptr);
  // x [..., C] → [..., C]
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  // The gate as the composition silu(w1 x) * w3 x: forward's reference.
  Tensor forward_reference(const Tensor& x) const;
  static int64_t default_d_ff(int64_t d_model);

  int64_t d_model, d_ff;
  std::shared_ptr<Linear> w1, w2, w3;  // gate, down, up (Hugging Face: gate_proj, down_proj, up_proj)

 private:
  StackedWeightCast w13_cast_;  // [W1; W3] in bf16 while generating under bf16 precision (one matmul)
};

}  // namespace tapegrad::nn
