// factory.cpp — creating tensors: constants, ranges, from host values, random.
// Random values are drawn on the host in row-major order from a Generator, so a seed gives the
// same tensor on every machine and every device.
#include <cmath>

#include "autograd/ops.h"
#include "autograd/ops/op_util.h"

namespace tapegrad {

namespace {

// A tensor on options.device_ holding `values` (doubles, converted to options.dtype_).
Tensor from_doubles(const std::vector<double>& values, const Shape& shape, Options options) {
  TG_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "tensor: {} values do not fill shape {} ({} elements)",
           values.size(), shape, shape.numel());
  const bool grad = options.requires_grad_;
  Tensor host = empty(shape, Options(kFloat64));
  std::copy(values.begin(), values.end(), host.data<double>());
  Tensor cast = empty(shape, Options(options.dtype_));
  detail::backend_of(cast).copy(detail::kview(cast), detail::kview(host));
  Tensor out = cast.to(options.device_);
  if (grad) out.requires_grad_(true);
  return out;
}

template <class Draw>
Tensor random_tensor(const Shape& shape, Options options, Draw draw) {
  std::vector<double> v(static_cast<size_t>(shape.numel()));
  for (double& x : v) x = draw();
  return from_doubles(v, shape, options);
}

}  // namespace

Tensor full(const Shape& shape, double value, Options options) {
  const bool grad = options.requires_grad_;
  Tensor t = empty(shape, options.requires_grad(false));
  detail::backend_of(t).fill(detail::kview(t), value);
  if (grad) t.requires_grad_(true);
  return t;
}
Tensor zeros(const Shape& shape, Options options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, Options options) { return full(shape, 1.0, options); }
Tensor zeros_like(const Tensor& t) {
  TG_CHECK(t.defined(), "zeros_like: undefined tensor");
  return zeros(t.shape(), t.options());
}
Tensor ones_like(const Tensor& t) {
  TG_CHECK(t.defined(), "ones_like: undefined tensor");
  return ones(t.shape(), t.options());
}
Tensor scalar_tensor(double value, Options options) { return full({}, value, options); }

Tensor arange(double end, Options options) { return arange(0.0, end, 1.0, options); }
Tensor arange(double start, double end, double step, Options options) {
  TG_CHECK(step != 0.0, "arange: step must be nonzero");
  TG_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step), "arange: bounds must be finite");
  const double n = std::ceil((end - start) / step);
  const int64_t count = n > 0 ? static_cast<int64_t>(n) : 0;
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[i] = start + static_cast<double>(i) * step;
  return from_doubles(v, {count}, options);
}

Tensor tensor(const std::vector<double>& values, Options options) {
  return from_doubles(values, {static_cast<int64_t>(values.size())}, options);
}
Tensor tensor(const std::vector<double>& values, const Shape& shape, Options options) {
  return from_doubles(values, shape, options);
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, bool requires_grad) {
  constexpr DType dt = std::is_same_v<T, float>    ? kFloat32
                       : std::is_same_v<T, double> ? kFloat64
                       : std::is_same_v<T, int32_t> ? kInt32
                                                    : kInt64;
  TG_CHECK(static_cast<int64_t>(values.size()) == shape.numel(),
           "from_vector: {} values do not fill shape {} ({} elements)", values.size(), shape, shape.numel());
  Tensor t = empty(shape, Options(dt));
  if (!values.empty()) std::copy(values.begin(), values.end(), t.data<T>());
  if (requires_grad) t.requires_grad_(true);
  return t;
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&, bool);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, bool);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, bool);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, bool);

Tensor rand(const Shape& shape, Options options, Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  return random_tensor(shape, options, [&] { return g.uniform(); });
}

Tensor randn(const Shape& shape, Options options, Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  return random_tensor(shape, options, [&] { return g.normal(); });
}

Tensor trunc_normal(const Shape& shape, double mean, double std, double a, double b, Options options,
                    Generator* gen) {
  TG_CHECK(std > 0 && a < b, "trunc_normal: need std > 0 and a < b, got std {} and [{}, {}]", std, a, b);
  TG_CHECK(a <= mean + 6 * std && b >= mean - 6 * std,
           "trunc_normal: the interval [{}, {}] is too far from the mean {} (std {}) to sample by rejection", a, b,
           mean, std);
  Generator& g = gen ? *gen : default_generator();
  return random_tensor(shape, options, [&] {
    for (;;) {
      const double x = mean + std * g.normal();
      if (x >= a && x <= b) return x;
    }
  });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Options options, Generator* gen) {
  TG_CHECK(low < high, "randint: empty range [{}, {})", low, high);
  Generator& g = gen ? *gen : default_generator();
  const uint64_t span = static_cast<uint64_t>(high - low);
  return random_tensor(shape, options, [&] { return static_cast<double>(low + static_cast<int64_t>(g.below(span))); });
}

}  // namespace tapegrad
