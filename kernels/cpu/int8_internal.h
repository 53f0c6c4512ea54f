// int8_internal.h — internal to kernels/cpu: the Q8_0 group quantizer (int8_quantize_group.cpp) shared by
// the weight quantizer (int8_quantize.cpp) and the activation quantizer of the int8 product (int8_matmul.cpp),
// and the row kernels of that product for small groups (int8_small_groups.cpp).
#pragma once
#include <cstdint>

#include "kernels/int8.h"

namespace tapegrad::kernels::cpu {

// Quantizes n values into q (scale = max|x| / 127, q = round_half_even(x / scale)); returns the scale.
// All zeros: scale 0. An inf or NaN among them: q = 0 and a NaN scale (every product with it is NaN).
// SIMD where the CPU has it (AVX-512, AVX2), the same bits as quantize_group_reference, the plain loop.
float quantize_group(const float* x, int64_t n, int8_t* q);
float quantize_group_reference(const float* x, int64_t n, int8_t* q);

// Every row of x [rows, cols] in groups of `group` along cols: q [rows, cols], scales [rows, ⌈cols/group⌉].
void quantize_rows(const float* x, int64_t rows, int64_t cols, int64_t group, int8_t* q, float* scales);

// y[n] for n in [n0, n1): row n of w against one row of activations — quantized (a [w.cols] int8 and its
// scales sa [w.groups_per_row()]) or float (x [w.cols]).
using Int8RowsQ = void (*)(const int8_t* a, const float* sa, const Int8Matrix& w, int64_t n0, int64_t n1, float* y);
using Int8RowsF = void (*)(const float* x, const Int8Matrix& w, int64_t n0, int64_t n1, float* y);
struct Int8RowKernels {
  Int8RowsQ q;
  Int8RowsF f;
};
// The group size a SIMD path's whole-group kernels step through (1 for Portable / Auto: any size).
inline int64_t path_step(Int8Path p) {
  switch (p) {
    case Int8Path::Avx2: return 32;
    case Int8Path::Avx512:
    case Int8Path::Avx512Vnni: return 64;
    case Int8Path::Auto:
    case Int8Path::Portable: break;
  }
  return 1;
}
// Groups smaller than the path's step (AVX2: 4, 8, 16; AVX-512 and VNNI: 4, 8, 16, 32), which the path's
// whole-group kernels cannot run. The kernels (null for Portable / Auto) need the CPU to run the path.
bool small_group_fits(Int8Path p, int64_t group);
Int8RowKernels small_group_kernels(Int8Path p);

}  // namespace tapegrad::kernels::cpu
