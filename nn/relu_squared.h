// relu_squared.h — the ReLU² feed-forward (So et al. 2021, "Primer"; the modded-nanogpt speedrun's MLP):
//   y = w2(relu(w1 x)²),  w1 [F, C], w2 [C, F], no biases, F = 4·C by default.
// Backward: with a = w1 x, h = relu(a)², dh/da = 2·relu(a) (0 where a ≤ 0), so dL/da = 2·relu(a)·dL/dh.
// forward runs it as relu then a product of the result with itself (the tape keeps relu(a) once). Not fused:
// no recipe uses it (docs/training.md, "The modern architecture"), so its cost has not been measured.
#pragma once
#include "nn/block_ffn.h"

namespace tapegrad::nn {

class ReluSquaredFFN : public BlockFFN {
 public:
  // d_ff ≤ 0: 4·d_model.
  ReluSquaredFFN(int64_t d_model, int64_t d_ff = 0, DType dtype = kFloat32, Generator* gen = nullptr);
  Tensor forward(const Tensor& x) const override;
  Tensor forward_reference(const Tensor& x) const override;
  FFNKind kind() const override { return FFNKind::ReLU2; }
};

}  // namespace tapegrad::nn
