// format.cpp — readable printing:  tensor([[1.0000, 2.0000], [3.0000, 4.0000]], dtype=float32, requires_grad=true)
// Large tensors print their first and last 3 entries per dim with "..." between.
#include <cmath>

#include "autograd/tensor.h"

namespace tapegrad {

namespace {

constexpr int64_t kEdge = 3, kSummarizeAbove = 1000;

void print_rec(std::string& s, const std::vector<double>& v, const Shape& shape, const Shape& strides, int d,
               int64_t base, bool summarize, bool floating, int indent) {
  if (d == shape.size()) {
    const double x = v[base];
    if (!floating) s += fmt::format("{}", static_cast<int64_t>(x));
    else if (std::isnan(x) || std::isinf(x)) s += fmt::format("{}", x);
    else s += fmt::format("{:.4f}", x);
    return;
  }
  s += "[";
  const int64_t n = shape[d];
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdge && i == kEdge) {
      s += d + 1 == shape.size() ? "..., " : fmt::format("...,\n{:{}}", "", indent + 1);
      i = n - kEdge;
    }
    print_rec(s, v, shape, strides, d + 1, base + i * strides[d], summarize, floating, indent + 1);
    if (i + 1 < n) s += d + 1 == shape.size() ? ", " : fmt::format(",\n{:{}}", "", indent + 1);
  }
  s += "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::vector<double> v = to_vector<double>();
  std::string s = "tensor(";
  print_rec(s, v, shape(), contiguous_strides(shape()), 0, 0, numel() > kSummarizeAbove, is_floating(dtype()), 7);
  s += fmt::format(", dtype={}", dtype());
  if (device().type != DeviceType::CPU) s += fmt::format(", device={}", device());
  if (requires_grad()) s += ", requires_grad=true";
  return s + ")";
}

}  // namespace tapegrad
