// layernorm.cpp — LayerNorm as a composition: mean, centre, mean of squares, rsqrt, scale, shift.
#include "nn/layernorm.h"

#include "autograd/ops_from_table.h"

namespace tapegrad::nn {

LayerNorm::LayerNorm(int64_t d, double e, bool affine, DType dtype) : d_model(d), eps(e) {
  TG_CHECK(d > 0, "LayerNorm: d_model must be positive, got {}", d);
  TG_CHECK(e >= 0, "LayerNorm: eps must be ≥ 0, got {}", e);
  if (affine) {
    weight = register_parameter("weight", ones({d}, dtype));
    bias = register_parameter("bias", zeros({d}, dtype));
  }
}

Tensor LayerNorm::forward(const Tensor& x) const {
  TG_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == d_model, "LayerNorm: input {} must end in d_model = {}",
           x.defined() ? x.shape() : Shape{}, d_model);
  TG_CHECK(is_floating(x.dtype()), "LayerNorm: input must be float32, float64 or bfloat16, got {}", x.dtype());
  Tensor mu = mean(x, {-1}, /*keepdim=*/true);          // [..., 1]  μ
  Tensor xc = x - mu;                                    // [..., C]  x − μ
  Tensor var = mean(xc * xc, {-1}, /*keepdim=*/true);   // [..., 1]  σ² (biased)
  Tensor y = xc * rsqrt(var + eps);                      // [..., C]  normalized
  if (!weight.defined()) return y;
  Tensor w = weight.dtype() == x.dtype() ? weight : weight.to(x.dtype());
  Tensor b = bias.dtype() == x.dtype() ? bias : bias.to(x.dtype());
  return y * w + b;                                      // [..., C]  γ ⊙ y + β
}

}  // namespace tapegrad::nn
