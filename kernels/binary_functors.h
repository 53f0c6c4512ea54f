// binary_functors.h — every elementwise binary op written once and shared by the CPU and CUDA
// elementwise templates (the binary counterpart of unary_functors.h).
//   F::f(a, b)          the value: T for arithmetic, bool for comparisons
// One functor per row of kernels/binary_ops.def (the table of ops), with the same name.
//   is_comparison_v<F>  true for Eq … Ge (result column `bool`), whose output tensor is Bool
//   binary_result_t<F, T>  the output element type of F on inputs of type T
#pragma once
#include <type_traits>

#include "kernels/backend.h"
#include "kernels/binary_op.h"

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
  template <class T> TG_HD static T f(T a, T b) { return T(a + b); }
};
struct Sub {  // a − b
  template <class T> TG_HD static T f(T a, T b) { return T(a - b); }
};
struct Mul {  // a · b
  template <class T> TG_HD static T f(T a, T b) { return T(a * b); }
};
struct Div {  // a / b (integers: truncated toward zero)
  template <class T> TG_HD static T f(T a, T b) { return T(a / b); }
};
// Comparisons: IEEE semantics (every comparison with NaN is false except Ne).
struct Eq {
  template <class T> TG_HD static bool f(T a, T b) { return a == b; }
};
struct Ne {
  template <class T> TG_HD static bool f(T a, T b) { return a != b; }
};
struct Lt {
  template <class T> TG_HD static bool f(T a, T b) { return a < b; }
};
struct Le {
  template <class T> TG_HD static bool f(T a, T b) { return a <= b; }
};
struct Gt {
  template <class T> TG_HD static bool f(T a, T b) { return a > b; }
};
struct Ge {
  template <class T> TG_HD static bool f(T a, T b) { return a >= b; }
};

// The result column of kernels/binary_ops.def, per functor.
template <class F>
struct is_comparison_functor;
#define TG_BINARY_RESULT_same false
#define TG_BINARY_RESULT_bool true
#define TG_BINARY(Functor, name, result)  \
  template <>                             \
  struct is_comparison_functor<Functor> { \
    static constexpr bool value = TG_BINARY_RESULT_##result; \
  };
#include "kernels/binary_ops.def"
#undef TG_BINARY
#undef TG_BINARY_RESULT_same
#undef TG_BINARY_RESULT_bool
template <class F>
inline constexpr bool is_comparison_v = is_comparison_functor<F>::value;

template <class F, class T>
using binary_result_t = std::conditional_t<is_comparison_v<F>, bool, T>;

// Calls visit(Functor{}) for a BinaryOp: one case per row of kernels/binary_ops.def.
template <class V>
TG_HD inline void visit_binary(BinaryOp op, V&& visit) {
  switch (op) {
#define TG_BINARY(Functor, name, result) \
  case BinaryOp::Functor:                \
    return visit(Functor{});
#include "kernels/binary_ops.def"
#undef TG_BINARY
  }
}

}  // namespace tapegrad::kernels::fn
