// feedforward.h — the original Transformer's position-wise feed-forward network:
//   y = w2(act(w1 x + b1)) + b2,   w1 [F, C], b1 [F], w2 [C, F], b2 [C]   (biases when bias = true)
//   act = ReLU (Vaswani et al. 2017) or GELU (exact erf form, x·Φ(x); BERT / GPT-2 use it)
// x [..., C] → [..., C]. Weights initialized as Linear (truncated normal), biases at zero.
// Parameter names: w1.weight, w1.bias, w2.weight, w2.bias (PyTorch's nn.Transformer: linear1, linear2).
#pragma once
#include <string_view>

#include "nn/linear.h"

namespace tapegrad::nn {

enum class Activation { Relu, Gelu };
// "relu" / "gelu" → Activation; anything else is a tapegrad::Error.
Activation activation_from_string(std::string_view name);
const char* activation_name(Activation a);
// relu(x) or gelu(x).
Tensor activate(Activation a, const Tensor& x);

class FeedForward : public Module {
 public:
  FeedForward(int64_t d_model, int64_t d_ff, Activation activation = Activation::Relu, bool bias = true,
              DType dtype = kFloat32, Generator* gen = nullptr);
  // x [..., C] → [..., C]
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  int64_t d_model, d_ff;
  Activation activation;
  std::shared_ptr<Linear> w1, w2;  // C → F, F → C
};

}  // namespace tapegrad::nn
