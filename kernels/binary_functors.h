// binary_functors.h — every elementwise binary op written once and shared by the CPU and CUDA
// elementwise templates (the binary counterpart of unary_functors.h).
//   F::f(a, b)          the value: T for arithmetic, bool for comparisons
//   F::kComparison      true for Eq … Ge, whose output tensor is Bool
//   binary_result_t<F, T>  the output element type of F on inputs of type T
#pragma once
#include <type_traits>

#include "kernels/backend.h"

#ifndef TG_HD
#ifdef __CUDACC__
#define TG_HD __host__ __device__
#else
#define TG_HD
#endif
#endif

namespace tapegrad::kernels::fn {

// Arithmetic: the result is cast back to T (int32 + int32 stays int32, wrapping as the CPU does).
struct Add {  // a + b
  static constexpr bool kComparison = false;
  template <class T> TG_HD static T f(T a, T b) { return T(a + b); }
};
struct Sub {  // a − b
  static constexpr bool kComparison = false;
  template <class T> TG_HD static T f(T a, T b) { return T(a - b); }
};
struct Mul {  // a · b
  static constexpr bool kComparison = false;
  template <class T> TG_HD static T f(T a, T b) { return T(a * b); }
};
struct Div {  // a / b (integers: truncated toward zero)
  static constexpr bool kComparison = false;
  template <class T> TG_HD static T f(T a, T b) { return T(a / b); }
};
// Comparisons: IEEE semantics (every comparison with NaN is false except Ne).
struct Eq {
  static constexpr bool kComparison = true;
  template <class T> TG_HD static bool f(T a, T b) { return a == b; }
};
struct Ne {
  static constexpr bool kComparison = true;
  template <class T> TG_HD static bool f(T a, T b) { return a != b; }
};
struct Lt {
  static constexpr bool kComparison = true;
  template <class T> TG_HD static bool f(T a, T b) { return a < b; }
};
struct Le {
  static constexpr bool kComparison = true;
  template <class T> TG_HD static bool f(T a, T b) { return a <= b; }
};
struct Gt {
  static constexpr bool kComparison = true;
  template <class T> TG_HD static bool f(T a, T b) { return a > b; }
};
struct Ge {
  static constexpr bool kComparison = true;
  template <class T> TG_HD static bool f(T a, T b) { return a >= b; }
};

template <class F, class T>
using binary_result_t = std::conditional_t<F::kComparison, bool, T>;

// Calls visit(Functor{}) for a BinaryOp.
template <class V>
TG_HD inline void visit_binary(BinaryOp op, V&& visit) {
  switch (op) {
    case BinaryOp::Add: return visit(Add{});
    case BinaryOp::Sub: return visit(Sub{});
    case BinaryOp::Mul: return visit(Mul{});
    case BinaryOp::Div: return visit(Div{});
    case BinaryOp::Eq: return visit(Eq{});
    case BinaryOp::Ne: return visit(Ne{});
    case BinaryOp::Lt: return visit(Lt{});
    case BinaryOp::Le: return visit(Le{});
    case BinaryOp::Gt: return visit(Gt{});
    case BinaryOp::Ge: return visit(Ge{});
  }
}

}  // namespace tapegrad::kernels::fn
