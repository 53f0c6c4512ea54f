// elementwise.cpp — elementwise ops, each forward followed by its backward.
// Broadcasting: the forward broadcasts its operands; a backward returns gradients of the
// output's shape and the engine sums them back to each input's shape (engine.cpp, sum_to).
#include <iterator>

#include "autograd/ops/op_util.h"
#include "autograd/ops_from_table.h"
#include "kernels/binary_op.h"
#include "kernels/unary_functors.h"
#include "kernels/unary_op.h"

namespace tapegrad {

using detail::backend_of;
using detail::kview;
using kernels::BinaryOp;
using kernels::UnaryOp;

namespace detail {

// out = a ∘ b with NumPy broadcasting (no recording).
Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = kernels::binary_op_name(op);
  check_defined(name, a);
  check_defined(name, b);
  check_same_device(name, a, b);
  check_same_dtype(name, a, b);
  const Shape& shape = a.shape() == b.shape() ? a.shape() : broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty(shape, Options(kernels::is_comparison(op) ? kBool : a.dtype()).device(a.device()));
  backend_of(a).binary(op, kview(out), kview(a, shape), kview(b, shape));
  return out;
}

// y = f(x) for a unary op (no recording).
Tensor unary_kernel(UnaryOp op, const Tensor& x, double param) {
  check_defined(kernels::unary_op_name(op), x);
  check_floating(kernels::unary_op_name(op), x);
  Tensor y = empty_like(x);
  backend_of(x).unary(op, kview(y), kview(x), param);
  return y;
}

}  // namespace detail

using detail::binary_kernel;
using detail::unary_kernel;

// ---- binary ----

// y = a + b;  ∂y/∂a = 1, ∂y/∂b = 1
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor y = binary_kernel(BinaryOp::Add, a, b);
  if (needs_grad(a, b))
    record("add", {&a, &b}, y, [](const Tensor& g, GradInputs& dx) {
      dx[0] = g;
      dx[1] = g;
    });
  return y;
}

// y = a − b;  ∂y/∂a = 1, ∂y/∂b = −1
Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor y = binary_kernel(BinaryOp::Sub, a, b);
  if (needs_grad(a, b))
    record("sub", {&a, &b}, y, [](const Tensor& g, GradInputs& dx) {
      dx[0] = g;
      if (dx.needs(1)) dx[1] = neg(g);
    });
  return y;
}

// y = a·b;  ∂y/∂a = b, ∂y/∂b = a
Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor y = binary_kernel(BinaryOp::Mul, a, b);
  if (needs_grad(a, b))
    record("mul", {&a, &b}, y,
           [sa = SavedTensor(b.requires_grad() ? a : Tensor()), sb = SavedTensor(a.requires_grad() ? b : Tensor())](
               const Tensor& g, GradInputs& dx) {
             if (dx.needs(0)) dx[0] = mul(g, sb.get());
             if (dx.needs(1)) dx[1] = mul(g, sa.get());
           });
  return y;
}

// y = a / b;  ∂y/∂a = 1/b, ∂y/∂b = −a/b² = −y/b
Tensor div(const Tensor& a, const Tensor& b) {
  Tensor y = binary_kernel(BinaryOp::Div, a, b);
  if (needs_grad(a, b))
    record("div", {&a, &b}, y,
           [sb = SavedTensor(b), sy = SavedTensor(b.requires_grad() ? y : Tensor(), true)](const Tensor& g,
                                                                                           GradInputs& dx) {
             const Tensor& bv = sb.get();
             if (dx.needs(0)) dx[0] = div(g, bv);
             if (dx.needs(1)) dx[1] = neg(div(mul(g, sy.get()), bv));
           });
  return y;
}

// ---- unary: value and derivative come from kernels/unary_functors.h; the backward is one
// fused kernel, dx = g · f'(x, y). ----

namespace {

// Which of x and y a unary op's derivative reads: the reads column of kernels/unary_ops.def.
// Only that one is saved for backward.
struct Needs {
  bool x, y;
  bool pass = false;  // df ≡ 1: dx = g, no kernel
};
constexpr Needs kReads_x{true, false}, kReads_y{false, true}, kReads_none{false, false},
    kReads_one{false, false, true};
constexpr Needs kDerivativeReads[] = {
#define TG_UNARY(Functor, name, reads, api) kReads_##reads,
#include "kernels/unary_ops.def"
#undef TG_UNARY
};
static_assert(std::size(kDerivativeReads) == kernels::kUnaryOpCount, "one entry per row of kernels/unary_ops.def");

Tensor unary(UnaryOp op, const Tensor& x, double param = 0.0) {
  Tensor y = unary_kernel(op, x, param);
  if (needs_grad(x)) {
    const Needs reads = kDerivativeReads[static_cast<int>(op)];
    if (reads.pass) {  // y = x + s: dy/dx = 1
      record(kernels::unary_op_name(op), {&x}, y, [](const Tensor& g, GradInputs& dx) { dx[0] = g; });
      return y;
    }
    record(kernels::unary_op_name(op), {&x}, y,
           [op, param, sx = SavedTensor(reads.x ? x : Tensor()), sy = SavedTensor(reads.y ? y : Tensor(), true)](
               const Tensor& g, GradInputs& dx) {
             // dx = g · df(x, y, p). At most one of x, y was saved and df never reads the other, so
             // it gets the saved one in both places (g itself when df reads neither).
             const Tensor& xv = sx.get();
             const Tensor& yv = sy.get();
             const Tensor& saved = xv.defined() ? xv : yv.defined() ? yv : g;
             Tensor gx = empty_like(g);
             backend_of(g).unary_backward(op, kview(gx), kview(g), kview(saved), kview(saved), param);
             dx[0] = gx;
           });
  }
  return y;
}

}  // namespace

// One function per row of kernels/unary_ops.def with api `unary`: Tensor exp(const Tensor& x), …
#define TG_UNARY_FUNCTION_unary(name, Functor) \
  Tensor name(const Tensor& x) { return unary(UnaryOp::Functor, x); }
#define TG_UNARY_FUNCTION_scalar(name, Functor)  // written by hand below
#define TG_UNARY(Functor, name, reads, api) TG_UNARY_FUNCTION_##api(name, Functor)
#include "kernels/unary_ops.def"
#undef TG_UNARY
#undef TG_UNARY_FUNCTION_unary
#undef TG_UNARY_FUNCTION_scalar

// The rows with a scalar p (api `scalar`).
Tensor pow(const Tensor& x, double exponent) { return unary(UnaryOp::Pow, x, exponent); }
Tensor add(const Tensor& a, double s) { return unary(UnaryOp::AddScalar, a, s); }
Tensor mul(const Tensor& a, double s) { return unary(UnaryOp::MulScalar, a, s); }

// ---- operators ----
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, double s) { return add(a, s); }
Tensor operator+(double s, const Tensor& a) { return add(a, s); }
Tensor operator-(const Tensor& a, double s) { return add(a, -s); }
Tensor operator-(double s, const Tensor& a) { return add(neg(a), s); }
Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
Tensor operator/(const Tensor& a, double s) { return mul(a, 1.0 / s); }
Tensor operator/(double s, const Tensor& a) { return mul(pow(a, -1.0), s); }

}  // namespace tapegrad
