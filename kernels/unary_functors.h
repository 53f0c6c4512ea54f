// unary_functors.h — value and derivative of every elementwise unary op, written once and
// shared by the CPU and CUDA elementwise templates.
//   f(x, p)      the value y
//   df(x, y, p)  dy/dx, given x and y = f(x) (using y where it is cheaper: exp, sigmoid, tanh)
// p is the op's scalar (exponent of Pow, the constant of AddScalar / MulScalar).
// One functor per row of kernels/unary_ops.def (the table of ops), with the same name.
#pragma once
#include <cmath>
#include <type_traits>

#include "kernels/backend.h"
#include "kernels/fast_math.h"
#include "kernels/unary_op.h"

#ifdef __CUDACC__
#define TG_HD __host__ __device__
#else
#define TG_HD
#endif

namespace tapegrad::kernels::fn {

// eˣ and tanh: the vectorizable float32 versions on the host (fast_math.h), libm otherwise.
template <class T>
TG_HD inline T exp_(T x) {
#ifndef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) return fast_exp(x);
#endif
  return std::exp(x);
}
template <class T>
TG_HD inline T tanh_(T x) {
#ifndef __CUDA_ARCH__
  if constexpr (std::is_same_v<T, float>) return fast_tanh(x);
#endif
  return std::tanh(x);
}

struct Neg {  // y = −x,  dy/dx = −1
  template <class T> TG_HD static T f(T x, T) { return -x; }
  template <class T> TG_HD static T df(T, T, T) { return T(-1); }
};
struct Exp {  // y = eˣ,  dy/dx = y
  template <class T> TG_HD static T f(T x, T) { return exp_(x); }
  template <class T> TG_HD static T df(T, T y, T) { return y; }
};
struct Log {  // y = ln x,  dy/dx = 1/x
  template <class T> TG_HD static T f(T x, T) { return std::log(x); }
  template <class T> TG_HD static T df(T x, T, T) { return T(1) / x; }
};
struct Sqrt {  // y = √x,  dy/dx = 1/(2y)
  template <class T> TG_HD static T f(T x, T) { return std::sqrt(x); }
  template <class T> TG_HD static T df(T, T y, T) { return T(0.5) / y; }
};
struct Rsqrt {  // y = x^(−1/2),  dy/dx = −½ x^(−3/2) = −½ y³
  template <class T> TG_HD static T f(T x, T) { return T(1) / std::sqrt(x); }
  template <class T> TG_HD static T df(T, T y, T) { return T(-0.5) * y * y * y; }
};
struct Abs {  // y = |x|,  dy/dx = sign(x)  (0 at 0, as PyTorch)
  template <class T> TG_HD static T f(T x, T) { return std::abs(x); }
  template <class T> TG_HD static T df(T x, T, T) { return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0)); }
};
struct Sigmoid {  // y = 1/(1+e⁻ˣ),  dy/dx = y(1−y)
  template <class T> TG_HD static T f(T x, T) { return T(1) / (T(1) + exp_(-x)); }
  template <class T> TG_HD static T df(T, T y, T) { return y * (T(1) - y); }
};
struct Tanh {  // y = tanh x,  dy/dx = 1 − y²
  template <class T> TG_HD static T f(T x, T) { return tanh_(x); }
  template <class T> TG_HD static T df(T, T y, T) { return T(1) - y * y; }
};
struct Relu {  // y = max(x, 0),  dy/dx = [x > 0]
  template <class T> TG_HD static T f(T x, T) { return x > T(0) ? x : T(0); }
  template <class T> TG_HD static T df(T x, T, T) { return x > T(0) ? T(1) : T(0); }
};
struct Silu {  // y = x·σ(x),  dy/dx = σ(x)·(1 + x·(1 − σ(x)))
  template <class T> TG_HD static T f(T x, T) { return x / (T(1) + exp_(-x)); }
  template <class T> TG_HD static T df(T x, T, T) {
    const T s = T(1) / (T(1) + exp_(-x));
    return s * (T(1) + x * (T(1) - s));
  }
};
struct Gelu {  // y = x·Φ(x) = ½x(1 + erf(x/√2)) (exact, not the tanh form),  dy/dx = Φ(x) + x·φ(x)
  template <class T> TG_HD static T f(T x, T) { return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440))); }
  template <class T> TG_HD static T df(T x, T, T) {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));  // Φ(x)
    const T pdf = T(0.39894228040143267794) * std::exp(T(-0.5) * x * x);     // φ(x) = e^(−x²/2)/√(2π)
    return cdf + x * pdf;
  }
};
struct Pow {  // y = xᵖ,  dy/dx = p·xᵖ⁻¹  (0 when p = 0)
  template <class T> TG_HD static T f(T x, T p) {
    if (p == T(2)) return x * x;
    if (p == T(1)) return x;
    return std::pow(x, p);
  }
  template <class T> TG_HD static T df(T x, T, T p) {
    if (p == T(0)) return T(0);
    if (p == T(2)) return T(2) * x;
    return p * std::pow(x, p - T(1));
  }
};
struct AddScalar {  // y = x + p,  dy/dx = 1
  template <class T> TG_HD static T f(T x, T p) { return x + p; }
  template <class T> TG_HD static T df(T, T, T) { return T(1); }
};
struct MulScalar {  // y = p·x,  dy/dx = p
  template <class T> TG_HD static T f(T x, T p) { return x * p; }
  template <class T> TG_HD static T df(T, T, T p) { return p; }
};

// Every row of kernels/unary_ops.def needs a functor above with a value and a derivative, each a
// template on the element type T: f(x, p) and df(x, y, p). Checked here, once per row, so that a
// missing one is a one-line error naming the op (before any kernel is instantiated).
template <class F, class = void>
struct has_value_and_derivative : std::false_type {};
template <class F>
struct has_value_and_derivative<F, std::void_t<decltype(F::f(0.0f, 0.0f)), decltype(F::df(0.0f, 0.0f, 0.0f)),
                                               decltype(F::f(0.0, 0.0)), decltype(F::df(0.0, 0.0, 0.0))>>
    : std::true_type {};
#define TG_UNARY(Functor, name, reads, api)                                                    \
  static_assert(has_value_and_derivative<Functor>::value, "kernels/unary_ops.def row " #Functor \
                ": struct fn::" #Functor " needs f(x, p) and df(x, y, p) (kernels/unary_functors.h)");
#include "kernels/unary_ops.def"
#undef TG_UNARY

// Calls visit(Functor{}) for a UnaryOp: one case per row of kernels/unary_ops.def.
template <class V>
TG_HD inline void visit_unary(UnaryOp op, V&& visit) {
  switch (op) {
#define TG_UNARY(Functor, name, reads, api) \
  case UnaryOp::Functor:                    \
    return visit(Functor{});
#include "kernels/unary_ops.def"
#undef TG_UNARY
  }
}

}  // namespace tapegrad::kernels::fn
