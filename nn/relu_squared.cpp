// relu_squared.cpp — ReLU² feed-forward (the math: relu_squared.h); the block FFN kinds by name.
#include "nn/relu_squared.h"

#include "autograd/ops_from_table.h"
#include "nn/swiglu.h"

namespace tapegrad::nn {

FFNKind ffn_kind_from_string(std::string_view name) {
  if (name == "swiglu") return FFNKind::SwiGLU;
  if (name == "relu2") return FFNKind::ReLU2;
  throw Error(fmt::format("the feed-forward must be swiglu or relu2, but is '{}'", name));
}

const char* ffn_kind_name(FFNKind kind) { return kind == FFNKind::ReLU2 ? "relu2" : "swiglu"; }

int64_t default_d_ff(FFNKind kind, int64_t d_model) {
  return kind == FFNKind::ReLU2 ? 4 * d_model : SwiGLU::default_d_ff(d_model);
}

std::shared_ptr<BlockFFN> make_block_ffn(FFNKind kind, int64_t d_model, int64_t d_ff, DType dtype, Generator* gen) {
  if (kind == FFNKind::ReLU2) return std::make_shared<ReluSquaredFFN>(d_model, d_ff, dtype, gen);
  return std::make_shared<SwiGLU>(d_model, d_ff, dtype, gen);
}

ReluSquaredFFN::ReluSquaredFFN(int64_t d, int64_t f, DType dtype, Generator* gen) {
  d_model = d;
  d_ff = f > 0 ? f : default_d_ff(FFNKind::ReLU2, d);
  w1 = register_module("w1", std::make_shared<Linear>(d_model, d_ff, false, dtype, gen));
  w2 = register_module("w2", std::make_shared<Linear>(d_ff, d_model, false, dtype, gen));
}

Tensor ReluSquaredFFN::forward(const Tensor& x) const {
  const Tensor r = relu(w1->forward(x));  // [..., F]
  return w2->forward(r * r);              // [..., C]
}

Tensor ReluSquaredFFN::forward_reference(const Tensor& x) const {
  const Tensor a = w1->forward(x);                            // [..., F]
  const Tensor positive = gt(a, scalar_tensor(0.0, a.options()));
  const Tensor zero = scalar_tensor(0.0, a.options());
  return w2->forward(where(positive, a * a, zero));           // a² where a > 0, else 0
}

}  // namespace tapegrad::nn
