// feedforward.cpp — two Linears with ReLU or GELU between them.
#include "nn/feedforward.h"

#include "autograd/ops_from_table.h"

namespace tapegrad::nn {

Activation activation_from_string(std::string_view name) {
  if (name == "relu") return Activation::Relu;
  if (name == "gelu") return Activation::Gelu;
  throw Error(fmt::format("unknown activation '{}' (expected relu or gelu)", name));
}

const char* activation_name(Activation a) { return a == Activation::Gelu ? "gelu" : "relu"; }

Tensor activate(Activation a, const Tensor& x) { return a == Activation::Gelu ? gelu(x) : relu(x); }

FeedForward::FeedForward(int64_t d, int64_t f, Activation act, bool bias, DType dtype, Generator* gen)
    : d_model(d), d_ff(f), activation(act) {
  TG_CHECK(d > 0 && f > 0, "FeedForward: d_model and d_ff must be positive, got {} and {}", d, f);
  w1 = register_module("w1", std::make_shared<Linear>(d, f, bias, dtype, gen));
  w2 = register_module("w2", std::make_shared<Linear>(f, d, bias, dtype, gen));
}

Tensor FeedForward::forward(const Tensor& x) const {
  Tensor h = activate(activation, w1->forward(x));  // [..., F] = act(x W1ᵀ + b1)
  return w2->forward(h);                             // [..., C] = h W2ᵀ + b2
}

}  // namespace tapegrad::nn
