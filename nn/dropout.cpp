// dropout.cpp — the Bernoulli mask from uniforms (keep where u < 1 − p) and the rescaled product.
#include "nn/dropout.h"

namespace tapegrad::nn {

namespace {
double checked_p(double p) {
  TG_CHECK(p >= 0.0 && p < 1.0, "Dropout: p must be in [0, 1), got {}", p);
  return p;
}
}  // namespace

Dropout::Dropout(double prob, std::shared_ptr<Generator> gen) : p(checked_p(prob)), generator(std::move(gen)) {}

Dropout::Dropout(double prob, uint64_t seed) : p(checked_p(prob)), generator(std::make_shared<Generator>(seed)) {}

Tensor Dropout::forward(const Tensor& x) const {
  TG_CHECK(x.defined(), "Dropout: undefined input");
  checked_p(p);  // p is a public field: re-check before use
  if (!is_training() || p == 0.0) return x;
  TG_CHECK(is_floating(x.dtype()), "Dropout: input must be float32, float64 or bfloat16, got {}", x.dtype());
  Generator* gen = generator ? generator.get() : &default_generator();
  // u ~ U[0, 1) drawn in float64 (53 bits) so P(u < 1 − p) is 1 − p exactly for any dtype.
  Tensor u = rand(x.shape(), Options(kFloat64).device(x.device()), gen);
  Tensor scale = lt(u, 1.0 - p).to(x.dtype()) * (1.0 / (1.0 - p));  // m / (1 − p), a constant
  return x * scale;
}

}  // namespace tapegrad::nn
