// linear.h — Linear: y = x Wᵀ (+ b), W stored [out, in] (PyTorch / CS336 layout).
// Init (CS336): W ~ N(0, σ²) truncated at ±3σ with σ = sqrt(2 / (in + out)); b = 0.
//
// Inference with int8 weights (kernels/int8.h, Q8_0): quantize_int8(group) replaces `weight` by
// `int8_weight` (the float parameter is released: the module then has no parameters and forward
// runs int8_linear, without a tape); set_int8_weight installs one that was loaded from a file.
#pragma once
#include <memory>
#include <vector>

#include "kernels/int8.h"
#include "nn/module.h"
#include "nn/precision.h"

namespace tapegrad::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = false, DType dtype = kFloat32,
         Generator* gen = nullptr);
  // x [..., in] → [..., out]
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  void quantize_int8(int64_t group);
  void set_int8_weight(kernels::Int8Matrix w);  // must be [out, in]

  int64_t in_features, out_features;
  Tensor weight;  // [out, in]; undefined once int8
  std::shared_ptr<const kernels::Int8Matrix> int8_weight;  // [out, in] in groups along in; null when float
  Tensor bias;    // [out], undefined when bias = false

 private:
  WeightCast weight_cast_, bias_cast_;  // their bf16 copies while a CastCacheGuard is alive (nn/precision.h)
};

// x [..., in] through several Linear layers that read it (attention's q, k, v; SwiGLU's w1, w3) in one matmul:
// [..., Σ out_i], the layers' outputs side by side — where StackedWeightCast applies (generation under bf16
// precision: the stacked bf16 copy stands in for each layer's) and every layer is a float Linear without bias.
// Undefined otherwise: the caller runs each layer. Each output column is the dot product its layer computes.
Tensor stacked_linear_forward(const Tensor& x, const std::vector<const Linear*>& layers, const StackedWeightCast& cast);

}  // namespace tapegrad::nn
