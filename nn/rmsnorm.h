// rmsnorm.h — RMSNorm over the last dim: y = x / sqrt(mean(x²) + eps) · g, g [C] starts at ones.
// Without a gain (gain = false; modded-nanogpt's norms): g is a constant 1, a non-persistent buffer — no
// parameter, nothing in the state dict, no gradient.
// Its statistic 1/rms is float32 or wider whatever the input dtype (float32 for bfloat16 x).
// forward runs the fused op rms_norm (one kernel each way); forward_reference is the composition.
#pragma once
#include "nn/module.h"

namespace tapegrad::nn {

class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t d_model, double eps = 1e-5, DType dtype = kFloat32, bool gain = true);
  // x [..., C] → [..., C]
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  // The residual add before this norm fused with it (pre-norm blocks): sum = x + branch, normed = forward(sum),
  // one pass each way (add_rms_norm, autograd/ops.h; branch undefined: sum = x). normed comes out in the dtype
  // the Matmul stage computes in (nn/precision.h: bfloat16 under BF16 for a float32 x), since it only feeds
  // linear layers: rounding it here once replaces a float32 copy and a rounding pass per reader.
  ResidualNorm forward_add(const Tensor& x, const Tensor& branch) const;
  // The same as a composition of autograd ops (mean, rsqrt, mul): forward's reference.
  Tensor forward_reference(const Tensor& x) const;

  int64_t d_model;
  double eps;
  bool gain;
  Tensor weight;  // g [C]: a parameter, or (gain = false) a constant buffer of ones
};

}  // namespace tapegrad::nn
