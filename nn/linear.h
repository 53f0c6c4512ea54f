// linear.h — Linear: y = x Wᵀ (+ b), W stored [out, in] (PyTorch / CS336 layout).
// Init (CS336): W ~ N(0, σ²) truncated at ±3σ with σ = sqrt(2 / (in + out)); b = 0.
#pragma once
#include "nn/module.h"

namespace tapegrad::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = false, DType dtype = kFloat32,
         Generator* gen = nullptr);
  // x [..., in] → [..., out]
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  int64_t in_features, out_features;
  Tensor weight;  // [out, in]
  Tensor bias;    // [out], undefined when bias = false
};

}  // namespace tapegrad::nn
