// simd_extremum.h — a portable correction for `#pragma omp simd reduction(max|min : m)` on floats.
// OpenMP starts each SIMD lane's private copy at the type's "least (most) representable value":
// GCC takes −inf (+inf), clang takes lowest() = −max() (max()). Where every value is −inf (+inf),
// clang's reduction answers lowest() (max()), a value that is not in the data: max over [−inf, −inf]
// came out −1.8e308, and argmax's "find the maximum's index" scan ran off the row.
// The true result differs from the reported one only when the reported one is exactly that bound,
// which is rare, so then the loop is redone in scalar code from the same start value.
#pragma once
#include <cstdint>
#include <limits>

namespace tapegrad::kernels::cpu {

// m: what the simd max loop gave; start: the value m held before it; at(j): the j-th of n values.
// NaN is skipped, as by the `x > m ? x : m` loops this follows.
template <class T, class At>
T fix_simd_max(T m, T start, int64_t n, At at) {
  if (m != std::numeric_limits<T>::lowest()) return m;
  T r = start;
  for (int64_t j = 0; j < n; ++j) r = at(j) > r ? at(j) : r;
  return r;
}

template <class T, class At>
T fix_simd_min(T m, T start, int64_t n, At at) {
  if (m != std::numeric_limits<T>::max()) return m;
  T r = start;
  for (int64_t j = 0; j < n; ++j) r = at(j) < r ? at(j) : r;
  return r;
}

}  // namespace tapegrad::kernels::cpu
