// rope.cpp — RoPE tables; the rotation through the fused op, and as a composition of views and
// elementwise ops (the reference).
#include "nn/rope.h"

#include <cmath>

namespace tapegrad::nn {

RotaryEmbedding::RotaryEmbedding(double th, int64_t d, int64_t max_len, DType dtype)
    : theta(th), head_dim(d), max_seq_len(max_len) {
  TG_CHECK(d > 0 && d % 2 == 0, "RotaryEmbedding: head_dim must be positive and even, got {}", d);
  TG_CHECK(max_len > 0, "RotaryEmbedding: max_seq_len must be positive, got {}", max_len);
  TG_CHECK(th > 0, "RotaryEmbedding: theta must be positive, got {}", th);
  const int64_t half = d / 2;
  std::vector<double> c(static_cast<size_t>(max_len * half)), s(c.size());
  for (int64_t p = 0; p < max_len; ++p)
    for (int64_t k = 0; k < half; ++k) {
      const double angle = static_cast<double>(p) * std::pow(th, -2.0 * static_cast<double>(k) / static_cast<double>(d));
      c[p * half + k] = std::cos(angle);
      s[p * half + k] = std::sin(angle);
    }
  cos_table = register_buffer("cos", tensor(c, {max_len, half}, dtype), /*persistent=*/false);
  sin_table = register_buffer("sin", tensor(s, {max_len, half}, dtype), /*persistent=*/false);
  position_ids = register_buffer("position_ids", arange(static_cast<double>(max_len)), /*persistent=*/false);
}

Tensor RotaryEmbedding::positions(int64_t start, int64_t count) const {
  TG_CHECK(start >= 0 && count >= 0 && start + count <= max_seq_len,
           "RotaryEmbedding: positions {}..{} are outside the table [0, {}) (sequence too long?)", start,
           start + count - 1, max_seq_len);
  return position_ids.narrow(0, start, count);
}

Tensor RotaryEmbedding::forward(const Tensor& x) const {
  TG_CHECK(x.dim() >= 2, "RotaryEmbedding: input must be [..., T, D], got {}", x.shape());
  return forward(x, positions(0, x.size(-2)));
}

Tensor RotaryEmbedding::forward(const Tensor& x, const Tensor& positions) const {
  const bool fused_shapes = x.dim() >= 2 && x.size(-1) == head_dim && positions.defined() && positions.dim() == 1 &&
                            positions.size(0) == x.size(-2) &&
                            (x.dtype() == kFloat32 || x.dtype() == kFloat64 || x.dtype() == kBFloat16);
  if (!fused_shapes) return forward_reference(x, positions);
  const auto [c, s] = tables_as(x.dtype());
  // tapegrad::rope checks every position against the table (a clear error for too long a sequence)
  return tapegrad::rope(x, c, s, positions);
}

std::pair<Tensor, Tensor> RotaryEmbedding::tables_as(DType dtype) const {
  if (cos_table.dtype() == dtype && sin_table.dtype() == dtype) return {cos_table, sin_table};
  ConvertedTables& t = converted_;
  const auto current = [dtype](const Tensor& copy, const std::weak_ptr<Storage>& source, uint64_t version,
                               const Tensor& table) {
    return copy.defined() && copy.dtype() == dtype && copy.device() == table.device() &&
           copy.shape() == table.shape() && source.lock() == table.storage() && version == table.storage()->version();
  };
  if (!current(t.cos, t.cos_source, t.cos_version, cos_table) ||
      !current(t.sin, t.sin_source, t.sin_version, sin_table)) {
    NoGradGuard no_grad;  // constants: no tape entry
    t.cos = cos_table.to(dtype), t.sin = sin_table.to(dtype);
    t.cos_source = cos_table.storage(), t.sin_source = sin_table.storage();
    t.cos_version = cos_table.storage()->version(), t.sin_version = sin_table.storage()->version();
  }
  return {t.cos, t.sin};
}

Tensor RotaryEmbedding::forward_reference(const Tensor& x, const Tensor& positions) const {
  TG_CHECK(x.dim() >= 2 && x.size(-1) == head_dim, "RotaryEmbedding: input {} must be [..., T, D] with D = {}",
           x.shape(), head_dim);
  TG_CHECK(positions.defined() && (positions.dtype() == kInt64 || positions.dtype() == kInt32),
           "RotaryEmbedding: positions must be int64 or int32");
  for (int64_t p : positions.to_vector<int64_t>())
    TG_CHECK(p >= 0 && p < max_seq_len,
             "RotaryEmbedding: position {} is outside the table [0, {}) (sequence longer than max_seq_len?)", p,
             max_seq_len);
  const int64_t half = head_dim / 2;
  Shape table_shape = positions.shape();
  table_shape.push_back(half);
  Tensor flat = positions.reshape({-1});
  Tensor cos = index_select(cos_table, 0, flat).reshape(table_shape);  // [..., T, D/2]
  Tensor sin = index_select(sin_table, 0, flat).reshape(table_shape);
  if (cos.dtype() != x.dtype()) {
    cos = cos.to(x.dtype());
    sin = sin.to(x.dtype());
  }
  Shape pairs = x.shape();
  pairs[pairs.size() - 1] = half;
  pairs.push_back(2);
  Tensor xp = x.reshape(pairs);           // [..., T, D/2, 2]
  Tensor x0 = xp.select(-1, 0);           // x[2k]   [..., T, D/2]
  Tensor x1 = xp.select(-1, 1);           // x[2k+1]
  Tensor y0 = x0 * cos - x1 * sin;
  Tensor y1 = x0 * sin + x1 * cos;
  return stack({y0, y1}, -1).reshape(x.shape());  // interleave back → [..., T, D]
}

}  // namespace tapegrad::nn
