// int8_quantize_group.cpp — the Q8_0 group quantizer (int8_internal.h: quantize_group, quantize_rows), which
// quantizes the weights once and every activation row of an int8 product (decoding: every matmul of every
// token). Three versions, the best the CPU runs picked once: AVX-512, AVX2 and the plain loop; and for groups
// of 4 under AVX-512, four groups per 16 floats (one per 128-bit lane). They all give the same bits:
// max|x| is exact in any order, x / scale is one IEEE division either way, and rounding half to even in
// SIMD (roundscale / round with _MM_FROUND_TO_NEAREST_INT) is what std::nearbyint does in the default mode.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 headers (see int8_matmul.cpp)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/int8_internal.h"

namespace tapegrad::kernels::cpu {

namespace {

// Values 0 and the scale for a group of zeros (amax 0) or one holding inf or NaN (a NaN scale, so every
// product with it is NaN).
float all_zero(int64_t n, int8_t* q, float scale) {
  for (int64_t i = 0; i < n; ++i) q[i] = 0;
  return scale;
}

// q = round_half_even(x / scale), clamped to [−127, 127] (|x / scale| ≤ 127 up to rounding: for safety).
int8_t quantize_one(float x, float scale) {
  const float v = std::nearbyint(x / scale);
  return static_cast<int8_t>(v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v));
}

float quantize_group_portable(const float* x, int64_t n, int8_t* q) {
  float amax = 0.0f, poison = 0.0f;  // poison: NaN when a value is inf or NaN (x · 0)
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    amax = a > amax ? a : amax;
    poison += x[i] * 0.0f;
  }
  if (poison != 0.0f) return all_zero(n, q, std::nanf(""));
  const float scale = amax / 127.0f;
  if (scale == 0.0f) return all_zero(n, q, 0.0f);
  for (int64_t i = 0; i < n; ++i) q[i] = quantize_one(x[i], scale);
  return scale;
}

#if defined(__x86_64__)
#define TG_Q_AVX2 __attribute__((target("avx2,fma")))
#define TG_Q_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw")))

TG_Q_AVX512 float quantize_group_avx512(const float* x, int64_t n, int8_t* q) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 amax = zero, poison = zero;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);  // lanes past n are 0: no effect on either
    amax = _mm512_max_ps(amax, _mm512_abs_ps(v));
    poison = _mm512_add_ps(poison, _mm512_mul_ps(v, zero));
  }
  if (_mm512_cmp_ps_mask(poison, poison, _CMP_UNORD_Q) != 0) return all_zero(n, q, std::nanf(""));
  const float scale = _mm512_reduce_max_ps(amax) / 127.0f;
  if (scale == 0.0f) return all_zero(n, q, 0.0f);
  const __m512 s = _mm512_set1_ps(scale), hi = _mm512_set1_ps(127.0f), lo = _mm512_set1_ps(-127.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 r = _mm512_roundscale_ps(_mm512_div_ps(_mm512_maskz_loadu_ps(m, x + i), s),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm512_mask_cvtepi32_storeu_epi8(q + i, m, _mm512_cvtps_epi32(_mm512_min_ps(hi, _mm512_max_ps(lo, r))));
  }
  return scale;
}

TG_Q_AVX2 float hmax256(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

TG_Q_AVX2 float quantize_group_avx2(const float* x, int64_t n, int8_t* q) {
  const __m256 zero = _mm256_setzero_ps(), abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 amax = zero, poison = zero;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    amax = _mm256_max_ps(amax, _mm256_and_ps(v, abs_mask));
    poison = _mm256_add_ps(poison, _mm256_mul_ps(v, zero));
  }
  float a = hmax256(amax), p = _mm256_movemask_ps(_mm256_cmp_ps(poison, poison, _CMP_UNORD_Q)) ? NAN : 0.0f;
  for (int64_t t = i; t < n; ++t) {
    const float f = std::fabs(x[t]);
    a = f > a ? f : a;
    p += x[t] * 0.0f;
  }
  if (p != 0.0f) return all_zero(n, q, std::nanf(""));
  const float scale = a / 127.0f;
  if (scale == 0.0f) return all_zero(n, q, 0.0f);
  const __m256 s = _mm256_set1_ps(scale), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
  for (int64_t k = 0; k + 8 <= n; k += 8) {
    const __m256 r = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + k), s),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i v = _mm256_cvtps_epi32(_mm256_min_ps(hi, _mm256_max_ps(lo, r)));
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + k), _mm_packs_epi16(w16, w16));
  }
  for (int64_t t = i; t < n; ++t) q[t] = quantize_one(x[t], scale);
  return scale;
}
// Groups of 4: each 128-bit lane of 16 floats is one group; its max and its inf/NaN test reach all four of
// its values through two in-lane permutes. The same operations on the same values as quantize_group.
TG_Q_AVX512 void quantize_row_g4_avx512(const float* x, int64_t cols, int8_t* q, float* scales) {
  const __m512 zero = _mm512_setzero_ps(), c127 = _mm512_set1_ps(127.0f), lo = _mm512_set1_ps(-127.0f);
  const __m512 nan = _mm512_set1_ps(std::nanf(""));
  for (int64_t k = 0; k < cols; k += 16) {
    const int64_t n = cols - k >= 16 ? 16 : cols - k;
    const __mmask16 m = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + k);  // lanes past cols are 0: no effect on max or poison
    __m512 a = _mm512_abs_ps(v), p = _mm512_mul_ps(v, zero);
    a = _mm512_max_ps(a, _mm512_permute_ps(a, _MM_SHUFFLE(2, 3, 0, 1)));
    a = _mm512_max_ps(a, _mm512_permute_ps(a, _MM_SHUFFLE(1, 0, 3, 2)));
    p = _mm512_add_ps(p, _mm512_permute_ps(p, _MM_SHUFFLE(2, 3, 0, 1)));
    p = _mm512_add_ps(p, _mm512_permute_ps(p, _MM_SHUFFLE(1, 0, 3, 2)));
    const __mmask16 bad = _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q);
    const __m512 s = _mm512_div_ps(a, c127);
    const __mmask16 zeros = __mmask16(bad | _mm512_cmp_ps_mask(s, zero, _CMP_EQ_OQ));
    const __m512 r = _mm512_roundscale_ps(_mm512_div_ps(v, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i qi = _mm512_maskz_cvtps_epi32(__mmask16(~zeros), _mm512_min_ps(c127, _mm512_max_ps(lo, r)));
    _mm512_mask_cvtepi32_storeu_epi8(q + k, m, qi);
    const __m512 sg = _mm512_maskz_compress_ps(0x1111, _mm512_mask_blend_ps(bad, s, nan));  // lanes 0, 4, 8, 12
    _mm512_mask_storeu_ps(scales + k / 4, __mmask16((1u << ((n + 3) / 4)) - 1), sg);
  }
}
#endif

using QuantizeGroup = float (*)(const float*, int64_t, int8_t*);

QuantizeGroup pick() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return quantize_group_avx512;
  if (avx2) return quantize_group_avx2;
#endif
  return quantize_group_portable;
}

}  // namespace

float quantize_group(const float* x, int64_t n, int8_t* q) {
  static const QuantizeGroup f = pick();
  return f(x, n, q);
}

float quantize_group_reference(const float* x, int64_t n, int8_t* q) { return quantize_group_portable(x, n, q); }

void quantize_rows(const float* x, int64_t rows, int64_t cols, int64_t group, int8_t* q, float* scales) {
  const int64_t gpr = (cols + group - 1) / group;
#if defined(__x86_64__)
  static const bool g4 = pick() == quantize_group_avx512;
  if (group == 4 && g4) {
    for (int64_t r = 0; r < rows; ++r) quantize_row_g4_avx512(x + r * cols, cols, q + r * cols, scales + r * gpr);
    return;
  }
#endif
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < gpr; ++g) {
      const int64_t k0 = g * group, n = std::min(group, cols - k0);
      scales[r * gpr + g] = quantize_group(x + r * cols + k0, n, q + r * cols + k0);
    }
}

}  // namespace tapegrad::kernels::cpu
