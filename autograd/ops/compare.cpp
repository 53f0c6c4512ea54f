// compare.cpp — comparisons (kBool results, not differentiable), where and masked_fill.
#include <cmath>

#include "autograd/ops/op_util.h"
#include "kernels/binary_op.h"

namespace tapegrad {

using detail::backend_of;
using detail::kview;
using kernels::BinaryOp;

namespace detail {
Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b);
}

namespace {
// a ∘ s. The scalar takes a's dtype, except a fractional (or huge, inf, NaN) scalar against an integer
// tensor: casting it would truncate (x < 1.5 would become x < 1) or overflow, so both sides are
// compared as float64 instead.
Tensor compare_scalar(BinaryOp op, const Tensor& a, double s) {
  detail::check_defined(kernels::binary_op_name(op), a);
  if (!is_floating(a.dtype()) && !(std::abs(s) < 2147483648.0 && s == std::trunc(s)))
    return detail::binary_kernel(op, a.to(kFloat64), scalar_tensor(s, Options(kFloat64).device(a.device())));
  return detail::binary_kernel(op, a, scalar_tensor(s, a.options()));
}
}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return detail::binary_kernel(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return detail::binary_kernel(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return detail::binary_kernel(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return detail::binary_kernel(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return detail::binary_kernel(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return detail::binary_kernel(BinaryOp::Ge, a, b); }
Tensor eq(const Tensor& a, double s) { return compare_scalar(BinaryOp::Eq, a, s); }
Tensor ne(const Tensor& a, double s) { return compare_scalar(BinaryOp::Ne, a, s); }
Tensor lt(const Tensor& a, double s) { return compare_scalar(BinaryOp::Lt, a, s); }
Tensor le(const Tensor& a, double s) { return compare_scalar(BinaryOp::Le, a, s); }
Tensor gt(const Tensor& a, double s) { return compare_scalar(BinaryOp::Gt, a, s); }
Tensor ge(const Tensor& a, double s) { return compare_scalar(BinaryOp::Ge, a, s); }

// y = cond ? a : b;   ∂y/∂a = [cond], ∂y/∂b = [¬cond]
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  detail::check_defined("where", cond);
  detail::check_defined("where", a);
  detail::check_defined("where", b);
  TG_CHECK(cond.dtype() == kBool, "where: the condition must be bool, got {} {}", cond.dtype(), cond.shape());
  detail::check_same_device("where", cond, a);
  detail::check_same_device("where", a, b);
  detail::check_same_dtype("where", a, b);
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor y = empty(shape, a.options());
  backend_of(a).where(kview(y), kview(cond, shape), kview(a, shape), kview(b, shape));
  if (needs_grad(a, b))
    record("where", {&cond, &a, &b}, y, [sc = SavedTensor(cond)](const Tensor& g, GradInputs& dx) {
      const Tensor zero = zeros({}, g.options());
      if (dx.needs(1)) dx[1] = where(sc.get(), g, zero);
      if (dx.needs(2)) dx[2] = where(sc.get(), zero, g);
    });
  return y;
}

// Composition: where(mask, value, x).
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  detail::check_defined("masked_fill", x);
  detail::check_defined("masked_fill", mask);
  TG_CHECK(mask.dtype() == kBool, "masked_fill: the mask must be bool, got {} {}", mask.dtype(), mask.shape());
  TG_CHECK(broadcast_shapes(x.shape(), mask.shape(), "masked_fill") == x.shape(),
           "masked_fill: mask {} does not broadcast to the tensor's shape {}", mask.shape(), x.shape());
  return where(mask, scalar_tensor(value, x.options()), x);
}

}  // namespace tapegrad
