// reduce.cpp — sum and max (primitives), mean, min, argmax and logsumexp (compositions).
#include <cmath>
#include <limits>

#include "autograd/ops/op_util.h"
#include "autograd/ops_from_table.h"

namespace tapegrad {

using detail::backend_of;
using detail::kview;
using detail::kview_as;

namespace {

// The reduced dims as a mask, and the keepdim / result shapes.
struct Reduction {
  std::vector<bool> reduced;
  Shape keep_shape, out_shape;
};
Reduction plan(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
  Reduction r;
  r.reduced.assign(x.dim(), false);
  for (int64_t d : dims) {
    const int w = wrap_dim(d, x.dim(), op);
    if (x.dim() == 0) continue;
    TG_CHECK(!r.reduced[w], "{}: dim {} appears twice in the reduced dims", op, d);
    r.reduced[w] = true;
  }
  for (int d = 0; d < x.dim(); ++d) {
    r.keep_shape.push_back(r.reduced[d] ? 1 : x.shape()[d]);
    if (!r.reduced[d] || keepdim) r.out_shape.push_back(r.keep_shape[d]);
  }
  return r;
}

std::vector<int64_t> all_dims(const Tensor& x) {
  std::vector<int64_t> d(x.dim());
  for (int i = 0; i < x.dim(); ++i) d[i] = i;
  return d;
}

}  // namespace

// y = Σ_dims x;   ∂y/∂x = 1 on every summed element: dx = g broadcast back to x's shape
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  detail::check_defined("sum", x);
  const Reduction r = plan(x, dims, keepdim, "sum");
  Tensor y = empty(r.out_shape, x.options());
  backend_of(x).reduce(kernels::ReduceOp::Sum, kview_as(y, r.keep_shape), kview(x));
  if (needs_grad(x))
    record("sum", {&x}, y, [keep = r.keep_shape, xs = x.shape()](const Tensor& g, GradInputs& dx) {
      dx[0] = g.reshape(keep).expand(xs);
    });
  return y;
}
Tensor sum(const Tensor& x) { return sum(x, all_dims(x), false); }

// y = max_dim x;   the gradient flows to the (first) arg-max only: dx = scatter(g at argmax)
Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined("max", x);
  const int d = wrap_dim(dim, x.dim(), "max");
  if (x.dim() == 0) return max(x.reshape({1}), 0, keepdim).reshape({});
  TG_CHECK(x.shape()[d] > 0, "max: cannot reduce dim {} of size 0 (shape {})", dim, x.shape());
  const Reduction r = plan(x, {dim}, keepdim, "max");
  Tensor y = empty(r.out_shape, x.options());
  Tensor idx = empty(r.keep_shape, Options(kInt64).device(x.device()));
  backend_of(x).max_along(kview_as(y, r.keep_shape), kview(idx), kview(x), d);
  if (needs_grad(x))
    record("max", {&x}, y, [idx, d, keep = r.keep_shape, xs = x.shape()](const Tensor& g, GradInputs& dx) {
      Tensor gx = zeros(xs, g.options());
      backend_of(gx).scatter_add(kview(gx), d, kview(idx), kview(g.reshape(keep)));
      dx[0] = gx;
    });
  return y;
}
Tensor max(const Tensor& x) {
  detail::check_defined("max", x);
  TG_CHECK(x.numel() > 0, "max: the tensor of shape {} is empty", x.shape());
  return max(x.reshape({-1}), 0, false);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined("argmax", x);
  const int d = wrap_dim(dim, x.dim(), "argmax");
  if (x.dim() == 0) return zeros({}, Options(kInt64).device(x.device()));
  TG_CHECK(x.shape()[d] > 0, "argmax: cannot reduce dim {} of size 0 (shape {})", dim, x.shape());
  const Reduction r = plan(x, {dim}, keepdim, "argmax");
  Tensor values = empty(r.keep_shape, x.options());
  Tensor idx = empty(r.out_shape, Options(kInt64).device(x.device()));
  backend_of(x).max_along(kview(values), kview_as(idx, r.keep_shape), kview(x), d);
  return idx;
}

// Compositions.
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  detail::check_defined("mean", x);
  detail::check_floating("mean", x);
  const Reduction r = plan(x, dims, keepdim, "mean");
  const int64_t n = x.numel() / std::max<int64_t>(1, r.keep_shape.numel());
  return mul(sum(x, dims, keepdim), 1.0 / static_cast<double>(n));
}
Tensor mean(const Tensor& x) { return mean(x, all_dims(x), false); }

Tensor min(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined("min", x);
  if (!is_floating(x.dtype())) {  // neg is float-only; integers need no gradient: reduce directly
    const int d = wrap_dim(dim, x.dim(), "min");
    TG_CHECK(x.dim() == 0 || x.shape()[d] > 0, "min: cannot reduce dim {} of size 0 (shape {})", dim, x.shape());
    const Reduction r = plan(x, {dim}, keepdim, "min");
    Tensor y = empty(r.out_shape, x.options());
    backend_of(x).reduce(kernels::ReduceOp::Min, kview_as(y, r.keep_shape), kview(x));
    return y;
  }
  return neg(max(neg(x), dim, keepdim));
}

// logsumexp(x) = m + log Σ exp(x − m), with m = max x held constant (its gradient cancels
// exactly), and m = 0 where the max is ±inf so an all −inf row gives −inf, not NaN.
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined("logsumexp", x);
  detail::check_floating("logsumexp", x);
  Tensor m;
  {
    NoGradGuard no_grad;
    m = max(x.detach(), dim, /*keepdim=*/true);
    m = masked_fill(m, eq(abs(m), std::numeric_limits<double>::infinity()), 0.0);
  }
  Tensor y = add(log(sum(exp(sub(x, m)), {dim}, /*keepdim=*/true)), m);
  return keepdim ? y : y.squeeze(dim);
}

}  // namespace tapegrad
