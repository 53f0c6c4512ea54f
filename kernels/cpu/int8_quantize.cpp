// int8_quantize.cpp — Q8_0 quantization of weights (kernels/int8.h): per group of `group` values
// along a row, scale = max|w| / 127 and q = round_half_even(w / scale), as llama2.c's export.py
// (torch.round rounds half to even; so does std::nearbyint in the default rounding mode).
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "kernels/cpu/int8_internal.h"
#include "kernels/error.h"
#include "kernels/int8.h"

namespace tapegrad::kernels {

void check_int8_matrix(const Int8Matrix& m, const char* what) {
  TG_CHECK(m.rows > 0 && m.cols > 0 && m.group > 0,
           "int8: {}: rows {}, cols {} and group {} must be positive", what, m.rows, m.cols, m.group);
  TG_CHECK(int64_t(m.q.size()) == m.rows * m.cols && int64_t(m.scales.size()) == m.rows * m.groups_per_row(),
           "int8: {}: holds {} values and {} scales, but [{}, {}] in groups of {} needs {} and {}", what, m.q.size(),
           m.scales.size(), m.rows, m.cols, m.group, m.rows * m.cols, m.rows * m.groups_per_row());
}

Int8Matrix quantize_int8(const float* w, int64_t rows, int64_t cols, int64_t group) {
  TG_CHECK(rows > 0 && cols > 0 && group > 0, "quantize_int8: rows {}, cols {} and group {} must be positive", rows,
           cols, group);
  Int8Matrix m;
  m.rows = rows, m.cols = cols, m.group = group;
  m.q.resize(size_t(rows * cols));
  m.scales.resize(size_t(rows * m.groups_per_row()));
  for (int64_t i = 0; i < rows * cols; ++i)
    TG_CHECK(std::isfinite(w[i]), "quantize_int8: value {} (row {}, column {}) is {}: only finite weights quantize", i,
             i / cols, i % cols, w[i]);
  cpu::quantize_rows(w, rows, cols, group, m.q.data(), m.scales.data());
  return m;
}

void dequantize_int8_row(const Int8Matrix& m, int64_t row, float* out) {
  const int64_t gpr = m.groups_per_row();
  const int8_t* q = m.q.data() + row * m.cols;
  const float* s = m.scales.data() + row * gpr;
  for (int64_t k = 0; k < m.cols; ++k) out[k] = float(q[k]) * s[k / m.group];
}

void dequantize_int8(const Int8Matrix& m, float* out) {
  for (int64_t r = 0; r < m.rows; ++r) dequantize_int8_row(m, r, out + r * m.cols);
}

namespace {

template <class E>
E parse_env(const char* name, std::initializer_list<std::pair<std::string_view, E>> values, E fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  std::string options;
  for (const auto& [text, e] : values) {
    if (text == v) return e;
    options += (options.empty() ? "" : ", ") + std::string(text);
  }
  throw Error(fmt::format("{}='{}' is not one of {}", name, v, options));
}

}  // namespace

Int8Activations int8_default_activations() {
  static const Int8Activations a = parse_env<Int8Activations>(
      "TAPEGRAD_INT8_ACTIVATIONS", {{"quantized", Int8Activations::Quantized}, {"float", Int8Activations::Float}},
      Int8Activations::Quantized);
  return a;
}

Int8Path int8_default_path() {
  static const Int8Path p = parse_env<Int8Path>("TAPEGRAD_INT8_PATH",
                                                {{"auto", Int8Path::Auto},
                                                 {"portable", Int8Path::Portable},
                                                 {"avx2", Int8Path::Avx2},
                                                 {"avx512", Int8Path::Avx512},
                                                 {"avx512-vnni", Int8Path::Avx512Vnni}},
                                                Int8Path::Auto);
  return p;
}

}  // namespace tapegrad::kernels
