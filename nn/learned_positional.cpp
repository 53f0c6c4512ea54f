// learned_positional.cpp — the position table and its addition (slice, so only rows < T get gradients).
#include "nn/learned_positional.h"

namespace tapegrad::nn {

LearnedPositionalEmbedding::LearnedPositionalEmbedding(int64_t n, int64_t d, DType dtype, Generator* gen)
    : max_len(n), d_model(d) {
  TG_CHECK(n > 0 && d > 0, "LearnedPositionalEmbedding: max_len and d_model must be positive, got {} and {}", n, d);
  weight = register_parameter("weight", trunc_normal({n, d}, 0.0, 1.0, -3.0, 3.0, dtype, gen));
}

Tensor LearnedPositionalEmbedding::forward(const Tensor& x) const {
  TG_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == d_model,
           "LearnedPositionalEmbedding: input must be [B, T, {}], got {}", d_model, x.defined() ? x.shape() : Shape{});
  const int64_t T = x.size(-2);
  TG_CHECK(T <= max_len, "LearnedPositionalEmbedding: sequence length {} exceeds max_len {}", T, max_len);
  return x + weight.slice(0, 0, T);  // [..., T, C] + [T, C]
}

}  // namespace tapegrad::nn
