// int8_small_groups.cpp — the int8 product (kernels/int8.h) for groups smaller than a SIMD register: 4, 8 and
// 16 bytes (AVX2, AVX-512), and 32 (AVX-512). Groups of 4 are what llama2.c's runq.c needs for stories260K
// (the group must divide d_model 64 and d_ff 172), and a plain loop over them costs a float multiply-add per
// four products. Here one 64-byte (32-byte) step does them all: vpdpbusd (or vpmaddubsw + vpmaddwd) leaves lane
// j holding the exact int32 sum of the products of bytes 4j..4j+3, which all lie in group 4j / group; the
// lanes are converted to float, multiplied by their group's scale_x · scale_w (the scales loaded side by side
// and spread over the lanes by a permute) and summed lane-wise; one horizontal sum per output. A row's last,
// partial step reads through a mask (AVX-512) or a zero-padded copy (AVX2), so any row length works.
// Results: every lane's integer sum is exact; the float sums run in another order than the portable loop's
// (a group of 8 is two lanes, each scaled), so they agree to float rounding (tests/test_int8.cpp).
// The float-activation kernels widen 16 (8) weights to float, multiply by x and by the lanes' scales.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 headers (see int8_matmul.cpp)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/int8_internal.h"

namespace tapegrad::kernels::cpu {

#if defined(__x86_64__)
namespace {

#define TG_SG_AVX2 __attribute__((target("avx2,fma")))
#define TG_SG_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw")))
#define TG_SG_AVX512_VNNI __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vnni")))

// Lane j of a step of `lanes` int32/float lanes, `first` elements into the step, belongs to group
// (first + j·width) / group of the step (width: elements per lane — 4 bytes, or 1 float).
void lane_groups(int32_t* out, int lanes, int64_t first, int64_t width, int64_t group) {
  for (int j = 0; j < lanes; ++j) out[j] = int32_t((first + j * width) / group);
}

// ---- AVX-512: 64 bytes per step ----
#define TG_SG_DOT64_VNNI(ua, sbv) _mm512_dpbusd_epi32(_mm512_setzero_si512(), ua, sbv)
#define TG_SG_DOT64_BW(ua, sbv) _mm512_madd_epi16(_mm512_maddubs_epi16(ua, sbv), _mm512_set1_epi16(1))
#define TG_SG_Q_512(NAME, ATTR, DOT64)                                                                          \
  ATTR void NAME(const int8_t* a, const float* sa, const Int8Matrix& w, int64_t n0, int64_t n1, float* y) {   \
    const int64_t K = w.cols, G = w.group, gpr = w.groups_per_row(), per = 64 / G;                            \
    const int64_t full = K / 64 * 64, rem = K - full;                                                         \
    alignas(64) int32_t lanes[16];                                                                            \
    lane_groups(lanes, 16, 0, 4, G);                                                                          \
    const __m512i idx = _mm512_load_si512(lanes);                                                             \
    const __mmask16 all = __mmask16((1u << per) - 1), tail = __mmask16((1u << ((rem + G - 1) / G)) - 1);     \
    const __mmask64 bytes = rem ? ~0ull >> (64 - rem) : 0;                                                    \
    auto step = [&](__m512 acc, __m512i va, __m512i vb, __m512 s) {                                           \
      const __m512i ua = _mm512_abs_epi8(va);                                                                 \
      const __m512i sbv = _mm512_mask_sub_epi8(vb, _mm512_movepi8_mask(va), _mm512_setzero_si512(), vb);      \
      return _mm512_fmadd_ps(_mm512_cvtepi32_ps(DOT64(ua, sbv)), _mm512_permutexvar_ps(idx, s), acc);         \
    };                                                                                                        \
    for (int64_t n = n0; n < n1; ++n) {                                                                       \
      const int8_t* b = w.q.data() + n * K;                                                                   \
      const float* sb = w.scales.data() + n * gpr;                                                            \
      __m512 acc = _mm512_setzero_ps();                                                                       \
      int64_t k = 0, g = 0;                                                                                   \
      for (; k < full; k += 64, g += per)                                                                     \
        acc = step(acc, _mm512_loadu_si512(a + k), _mm512_loadu_si512(b + k),                                 \
                   _mm512_mul_ps(_mm512_maskz_loadu_ps(all, sa + g), _mm512_maskz_loadu_ps(all, sb + g)));    \
      if (rem)                                                                                                \
        acc = step(acc, _mm512_maskz_loadu_epi8(bytes, a + k), _mm512_maskz_loadu_epi8(bytes, b + k),         \
                   _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, sa + g), _mm512_maskz_loadu_ps(tail, sb + g)));  \
      y[n] = _mm512_reduce_add_ps(acc);                                                                       \
    }                                                                                                         \
  }
TG_SG_Q_512(rows_q_avx512, TG_SG_AVX512, TG_SG_DOT64_BW)
TG_SG_Q_512(rows_q_vnni, TG_SG_AVX512_VNNI, TG_SG_DOT64_VNNI)

TG_SG_AVX512 void rows_f_avx512(const float* x, const Int8Matrix& w, int64_t n0, int64_t n1, float* y) {
  const int64_t K = w.cols, G = w.group, gpr = w.groups_per_row(), per = 64 / G;
  const int64_t full = K / 64 * 64, rem = K - full;
  alignas(64) int32_t lanes[4][16];
  for (int c = 0; c < 4; ++c) lane_groups(lanes[c], 16, 16 * c, 1, G);
  const __m512i idx[4] = {_mm512_load_si512(lanes[0]), _mm512_load_si512(lanes[1]), _mm512_load_si512(lanes[2]),
                          _mm512_load_si512(lanes[3])};
  const __mmask16 all = __mmask16((1u << per) - 1), tail = __mmask16((1u << ((rem + G - 1) / G)) - 1);
  const __mmask64 bytes = rem ? ~0ull >> (64 - rem) : 0;
  // 64 weights times 64 floats of x, each scaled by its group's scale (s: the step's scales side by side).
  auto step = [&](__m512 acc, const float* px, __m512i vb, __m512 s, __mmask64 m) {
    const __m128i q[4] = {_mm512_extracti32x4_epi32(vb, 0), _mm512_extracti32x4_epi32(vb, 1),
                          _mm512_extracti32x4_epi32(vb, 2), _mm512_extracti32x4_epi32(vb, 3)};
    for (int c = 0; c < 4; ++c) {
      const __m512 xv = _mm512_maskz_loadu_ps(__mmask16(m >> (16 * c)), px + 16 * c);
      const __m512 wv = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q[c]));
      acc = _mm512_fmadd_ps(_mm512_mul_ps(xv, wv), _mm512_permutexvar_ps(idx[c], s), acc);
    }
    return acc;
  };
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* b = w.q.data() + n * K;
    const float* sb = w.scales.data() + n * gpr;
    __m512 acc = _mm512_setzero_ps();
    int64_t k = 0, g = 0;
    for (; k < full; k += 64, g += per)
      acc = step(acc, x + k, _mm512_loadu_si512(b + k), _mm512_maskz_loadu_ps(all, sb + g), ~0ull);
    if (rem) acc = step(acc, x + k, _mm512_maskz_loadu_epi8(bytes, b + k), _mm512_maskz_loadu_ps(tail, sb + g), bytes);
    y[n] = _mm512_reduce_add_ps(acc);
  }
}

// ---- AVX2: 32 bytes per step; a row's partial last step goes through zero-padded copies ----
TG_SG_AVX2 float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// The first n of 8 scales (the rest 0), without reading past them.
TG_SG_AVX2 __m256 load_scales(const float* p, int64_t n) {
  const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_maskload_ps(p, m);
}

TG_SG_AVX2 void rows_q_avx2(const int8_t* a, const float* sa, const Int8Matrix& w, int64_t n0, int64_t n1, float* y) {
  const int64_t K = w.cols, G = w.group, gpr = w.groups_per_row(), per = 32 / G;
  const int64_t full = K / 32 * 32, rem = K - full, tail_groups = (rem + G - 1) / G;
  alignas(32) int32_t lanes[8];
  lane_groups(lanes, 8, 0, 4, G);
  const __m256i idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes)), ones = _mm256_set1_epi16(1);
  alignas(32) int8_t a_tail[32] = {}, b_tail[32] = {};
  if (rem) std::memcpy(a_tail, a + full, size_t(rem));
  auto step = [&](__m256 acc, const int8_t* pa, const int8_t* pb, __m256 s) {
    const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pa));
    const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb));
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(va, va), _mm256_sign_epi8(vb, va));
    const __m256i isum = _mm256_madd_epi16(p16, ones);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_permutevar8x32_ps(s, idx), acc);
  };
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* b = w.q.data() + n * K;
    const float* sb = w.scales.data() + n * gpr;
    __m256 acc = _mm256_setzero_ps();
    int64_t k = 0, g = 0;
    for (; k < full; k += 32, g += per)
      acc = step(acc, a + k, b + k, _mm256_mul_ps(load_scales(sa + g, per), load_scales(sb + g, per)));
    if (rem) {
      std::memcpy(b_tail, b + k, size_t(rem));
      const __m256 s = _mm256_mul_ps(load_scales(sa + g, tail_groups), load_scales(sb + g, tail_groups));
      acc = step(acc, a_tail, b_tail, s);
    }
    y[n] = hsum8(acc);
  }
}

TG_SG_AVX2 void rows_f_avx2(const float* x, const Int8Matrix& w, int64_t n0, int64_t n1, float* y) {
  const int64_t K = w.cols, G = w.group, gpr = w.groups_per_row(), per = 32 / G;
  const int64_t full = K / 32 * 32, rem = K - full, tail_groups = (rem + G - 1) / G;
  alignas(32) int32_t lanes[4][8];
  for (int c = 0; c < 4; ++c) lane_groups(lanes[c], 8, 8 * c, 1, G);
  __m256i idx[4];
  for (int c = 0; c < 4; ++c) idx[c] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes[c]));
  alignas(32) float x_tail[32] = {};
  alignas(32) int8_t b_tail[32] = {};
  if (rem) std::memcpy(x_tail, x + full, size_t(rem) * sizeof(float));
  auto step = [&](__m256 acc, const float* px, const int8_t* pb, __m256 s) {
    for (int c = 0; c < 4; ++c) {
      const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(pb + 8 * c));
      const __m256 wv = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
      acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(px + 8 * c), wv), _mm256_permutevar8x32_ps(s, idx[c]), acc);
    }
    return acc;
  };
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* b = w.q.data() + n * K;
    const float* sb = w.scales.data() + n * gpr;
    __m256 acc = _mm256_setzero_ps();
    int64_t k = 0, g = 0;
    for (; k < full; k += 32, g += per) acc = step(acc, x + k, b + k, load_scales(sb + g, per));
    if (rem) {
      std::memcpy(b_tail, b + k, size_t(rem));
      acc = step(acc, x_tail, b_tail, load_scales(sb + g, tail_groups));
    }
    y[n] = hsum8(acc);
  }
}

}  // namespace
#endif

bool small_group_fits(Int8Path p, int64_t group) {
  const int64_t step = path_step(p);  // 1 for Portable / Auto: no small groups there
  return step > 1 && group >= 4 && group < step && group % 4 == 0 && step % group == 0;
}

Int8RowKernels small_group_kernels(Int8Path p) {
  switch (p) {
#if defined(__x86_64__)
    case Int8Path::Avx2: return {rows_q_avx2, rows_f_avx2};
    case Int8Path::Avx512: return {rows_q_avx512, rows_f_avx512};
    case Int8Path::Avx512Vnni: return {rows_q_vnni, rows_f_avx512};
#else
    case Int8Path::Avx2:
    case Int8Path::Avx512:
    case Int8Path::Avx512Vnni:
#endif
    case Int8Path::Auto:
    case Int8Path::Portable: break;
  }
  return {nullptr, nullptr};
}

}  // namespace tapegrad::kernels::cpu
