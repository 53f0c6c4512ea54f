// sinusoidal_positional.cpp — the sin/cos table and its addition.
#include "nn/sinusoidal_positional.h"

#include <cmath>
#include <vector>

namespace tapegrad::nn {

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(int64_t n, int64_t d, DType dtype)
    : max_len(n), d_model(d) {
  TG_CHECK(n > 0 && d > 0, "SinusoidalPositionalEncoding: max_len and d_model must be positive, got {} and {}", n, d);
  std::vector<double> table(static_cast<size_t>(n * d));
  for (int64_t pos = 0; pos < n; ++pos)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t two_i = j - j % 2;  // 2i for both columns 2i and 2i+1
      const double angle = static_cast<double>(pos) / std::pow(10000.0, static_cast<double>(two_i) / static_cast<double>(d));
      table[static_cast<size_t>(pos * d + j)] = j % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  pe = register_buffer("pe", tensor(table, {n, d}, Options(dtype)), /*persistent=*/false);
}

Tensor SinusoidalPositionalEncoding::forward(const Tensor& x) const {
  TG_CHECK(x.defined() && x.dim() >= 2 && x.size(-1) == d_model,
           "SinusoidalPositionalEncoding: input must be [B, T, {}], got {}", d_model, x.defined() ? x.shape() : Shape{});
  const int64_t T = x.size(-2);
  TG_CHECK(T <= max_len, "SinusoidalPositionalEncoding: sequence length {} exceeds max_len {}", T, max_len);
  Tensor table = pe.slice(0, 0, T);  // [T, C]
  return x + (table.dtype() == x.dtype() ? table : table.to(x.dtype()));
}

}  // namespace tapegrad::nn
