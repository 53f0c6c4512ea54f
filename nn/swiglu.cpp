// swiglu.cpp — SwiGLU: three Linears and the fused gate silu(a)⊙b (swiglu; the composition
// silu(a) * b is kept as forward_reference).
#include "nn/swiglu.h"

#include "autograd/ops_from_table.h"

namespace tapegrad::nn {

int64_t SwiGLU::default_d_ff(int64_t d) {
  const int64_t raw = (8 * d + 2) / 3;  // ⌈8d/3⌉
  return (raw + 63) / 64 * 64;
}

SwiGLU::SwiGLU(int64_t d, int64_t f, DType dtype, Generator* gen) {
  d_model = d;
  d_ff = f > 0 ? f : default_d_ff(d);
  w1 = register_module("w1", std::make_shared<Linear>(d_model, d_ff, false, dtype, gen));
  w2 = register_module("w2", std::make_shared<Linear>(d_ff, d_model, false, dtype, gen));
  w3 = register_module("w3", std::make_shared<Linear>(d_model, d_ff, false, dtype, gen));
}

Tensor SwiGLU::forward(const Tensor& x) const {
  // Generating under bf16 precision: w1 x and w3 x side by side from one matmul (StackedWeightCast).
  const Tensor gate_up = stacked_linear_forward(x, {w1.get(), w3.get()}, w13_cast_);  // [..., 2F] or undefined
  const int64_t F = w1->out_features;
  Tensor h = gate_up.defined() ? swiglu(gate_up.narrow(-1, 0, F), gate_up.narrow(-1, F, F))
                               : swiglu(w1->forward(x), w3->forward(x));  // [..., F] = silu(w1 x) ⊙ w3 x
  return w2->forward(h);                                    // [..., C]
}

Tensor SwiGLU::forward_reference(const Tensor& x) const {
  Tensor h = silu(w1->forward(x)) * w3->forward(x);  // [..., F]
  return w2->forward(h);                              // [..., C]
}

}  // namespace tapegrad::nn
