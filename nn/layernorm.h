// layernorm.h — LayerNorm over the last dim (Ba, Kiros & Hinton 2016; the original Transformer's norm):
//   μ = mean(x),  σ² = mean((x − μ)²)   (biased variance, as PyTorch),   over the C features
//   y = (x − μ) / sqrt(σ² + eps) · weight + bias,   weight [C] starts at ones, bias [C] at zeros
// x [..., C] → [..., C]. A composition of autograd ops (mean, sub, mul, rsqrt, add), so its gradient
// comes from its parts. The statistics are computed in the input's dtype, float32 or float64 (the only
// floating dtypes tapegrad has, both "float32 or wider"; the CPU backend's sums accumulate in double).
// elementwise_affine = false: no parameters, y = (x − μ) / sqrt(σ² + eps).
// Parameter names (PyTorch): weight, bias.
#pragma once
#include "nn/module.h"

namespace tapegrad::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t d_model, double eps = 1e-5, bool elementwise_affine = true, DType dtype = kFloat32);
  // x [..., C] → [..., C]
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  int64_t d_model;
  double eps;
  Tensor weight;  // γ [C], undefined without elementwise_affine
  Tensor bias;    // β [C], undefined without elementwise_affine
};

}  // namespace tapegrad::nn
