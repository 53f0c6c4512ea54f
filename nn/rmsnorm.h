// rmsnorm.h — RMSNorm over the last dim: y = x / sqrt(mean(x²) + eps) · g, g [C] starts at ones.
// Computed in float32 or wider whatever the input dtype (tapegrad has only float32/float64
// floating dtypes today, so the input's dtype is already wide enough; the result has it too).
// forward runs the fused op rms_norm (one kernel each way); forward_reference is the composition.
#pragma once
#include "nn/module.h"

namespace tapegrad::nn {

class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t d_model, double eps = 1e-5, DType dtype = kFloat32);
  // x [..., C] → [..., C]
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  // The same as a composition of autograd ops (mean, rsqrt, mul): forward's reference.
  Tensor forward_reference(const Tensor& x) const;

  int64_t d_model;
  double eps;
  Tensor weight;  // g [C]
};

}  // namespace tapegrad::nn
