// int8_internal.h — internal to kernels/cpu: the Q8_0 group quantizer shared by the weight
// quantizer (int8_quantize.cpp) and the activation quantizer of the int8 product (int8_matmul.cpp).
#pragma once
#include <cstdint>

namespace tapegrad::kernels::cpu {

// Quantizes n values into q (scale = max|x| / 127, q = round_half_even(x / scale)); returns the scale.
// All zeros: scale 0. An inf or NaN among them: q = 0 and a NaN scale (every product with it is NaN).
float quantize_group(const float* x, int64_t n, int8_t* q);

// Every row of x [rows, cols] in groups of `group` along cols: q [rows, cols], scales [rows, ⌈cols/group⌉].
void quantize_rows(const float* x, int64_t rows, int64_t cols, int64_t group, int8_t* q, float* scales);

}  // namespace tapegrad::kernels::cpu
