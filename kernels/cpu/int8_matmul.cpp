// int8_matmul.cpp — y [M, N] = x [M, K] · Wᵀ with W int8 in groups (kernels/int8.h), on the CPU.
//
// One dot product per (row of x, row of W); output rows of W are split across OpenMP threads, and
// each thread keeps one weight row in L1 while it runs every row of x against it (prefill reads the
// weights once too). Each path is compiled with its own target attribute and chosen at run time, so
// one binary runs on any x86-64 CPU:
//   avx512-vnni  vpdpbusd: 64 int8 products summed into 16 int32 lanes per instruction
//   avx512       vpmaddubsw + vpmaddwd: the same products through int16 pairs (exact: |a·b| ≤ 127²)
//   avx2         the same on 32 bytes
//   portable     plain loops (what any compiler vectorizes as it can)
// Groups smaller than a path's step (4, 8, 16; 32 on AVX-512) run the same path's small-group kernels
// (int8_small_groups.cpp). Each kernel runs a range of output rows per call (no call per row), and the CPU's
// features are read once.
// vpdpbusd/vpmaddubsw multiply an unsigned byte by a signed one: we feed |a| and b·sign(a), whose
// product is a·b. Every group's integer sum is exact in all paths; only the float accumulation of the
// scaled group sums differs in order (the tests compare paths at float tolerance, and exactly with
// scales of 1).
// GCC 12's own AVX-512 headers write `__m512 __Y = __Y;` for _mm512_undefined_ps(), which its
// -Wuninitialized then reports inside _mm512_cvtepi32_ps and _mm512_reduce_add_ps: a false positive
// in the compiler's headers, silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/int8_internal.h"
#include "kernels/cpu/parallel.h"
#include "kernels/error.h"
#include "kernels/int8.h"

namespace tapegrad::kernels {

namespace {

// a·b summed over one group, both int8 (a: activations, b: weights).
int32_t group_dot(const int8_t* a, const int8_t* b, int64_t n) {
  int32_t s = 0;
  for (int64_t k = 0; k < n; ++k) s += int32_t(a[k]) * int32_t(b[k]);
  return s;
}

// The last, shorter group of a row (cols not a multiple of group): what the SIMD paths leave.
float tail_q(const int8_t* a, const float* sa, const int8_t* b, const float* sb, int64_t cols, int64_t group) {
  const int64_t full = cols / group, k0 = full * group;
  return k0 == cols ? 0.0f : float(group_dot(a + k0, b + k0, cols - k0)) * (sa[full] * sb[full]);
}
float tail_f(const float* x, const int8_t* b, const float* sb, int64_t cols, int64_t group) {
  const int64_t full = cols / group, k0 = full * group;
  float s = 0.0f;
  for (int64_t k = k0; k < cols; ++k) s += x[k] * float(b[k]);
  return s * sb[full];
}

// ---- portable ----
float dot_q_portable(const int8_t* a, const float* sa, const int8_t* b, const float* sb, int64_t cols, int64_t group) {
  const int64_t full = cols / group;
  float acc = 0.0f;
  for (int64_t g = 0; g < full; ++g) acc += float(group_dot(a + g * group, b + g * group, group)) * (sa[g] * sb[g]);
  return acc + tail_q(a, sa, b, sb, cols, group);
}
float dot_f_portable(const float* x, const int8_t* b, const float* sb, int64_t cols, int64_t group) {
  const int64_t full = cols / group;
  float acc = 0.0f;
  for (int64_t g = 0; g < full; ++g) {
    float s = 0.0f;
    for (int64_t k = g * group; k < (g + 1) * group; ++k) s += x[k] * float(b[k]);
    acc += s * sb[g];
  }
  return acc + tail_f(x, b, sb, cols, group);
}

#if defined(__x86_64__)
#define TG_AVX2 __attribute__((target("avx2,fma")))
#define TG_AVX512 __attribute__((target("avx2,fma,avx512f,avx512bw")))
#define TG_AVX512_VNNI __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vnni")))

TG_AVX2 float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---- avx2: groups of a multiple of 32 ----
TG_AVX2 float dot_q_avx2(const int8_t* a, const float* sa, const int8_t* b, const float* sb, int64_t cols,
                         int64_t group) {
  const int64_t full = cols / group;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t g = 0; g < full; ++g) {
    const int8_t *pa = a + g * group, *pb = b + g * group;
    __m256i isum = _mm256_setzero_si256();
    for (int64_t k = 0; k < group; k += 32) {
      const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pa + k));
      const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + k));
      const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(va, va), _mm256_sign_epi8(vb, va));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p16, ones));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(sa[g] * sb[g]), acc);
  }
  return hsum256(acc) + tail_q(a, sa, b, sb, cols, group);
}
TG_AVX2 float dot_f_avx2(const float* x, const int8_t* b, const float* sb, int64_t cols, int64_t group) {
  const int64_t full = cols / group;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t g = 0; g < full; ++g) {
    const float* px = x + g * group;
    const int8_t* pb = b + g * group;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (int64_t k = 0; k < group; k += 16) {
      const __m128i w16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + k));
      const __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(w16));
      const __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(w16, 8)));
      s0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(px + k), s0);
      s1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(px + k + 8), s1);
    }
    acc = _mm256_fmadd_ps(_mm256_add_ps(s0, s1), _mm256_set1_ps(sb[g]), acc);
  }
  return hsum256(acc) + tail_f(x, b, sb, cols, group);
}

// ---- avx512 (with and without VNNI): groups of a multiple of 64 ----
// tail_q through a masked load (the same exact integer sum, so the same float): up to 63 values.
TG_AVX512 float tail_q_512(const int8_t* a, const float* sa, const int8_t* b, const float* sb, int64_t cols,
                           int64_t group) {
  const int64_t full = cols / group, k0 = full * group, n = cols - k0;
  if (n == 0) return 0.0f;
  if (n >= 64) return tail_q(a, sa, b, sb, cols, group);
  const __mmask64 m = ~0ull >> (64 - n);
  const __m512i va = _mm512_maskz_loadu_epi8(m, a + k0), vb = _mm512_maskz_loadu_epi8(m, b + k0);
  const __m512i p16 = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(_mm512_castsi512_si256(va)),
                                         _mm512_cvtepi8_epi16(_mm512_castsi512_si256(vb)));
  const __m512i q16 = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(va, 1)),
                                         _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(vb, 1)));
  const __m512i ones = _mm512_set1_epi16(1);
  const int32_t s =
      _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_madd_epi16(p16, ones), _mm512_madd_epi16(q16, ones)));
  return float(s) * (sa[full] * sb[full]);
}
// One 64-byte step: |a| (unsigned) times b·sign(a) (signed), summed into 16 int32 lanes.
#define TG_DOT64_VNNI(isum, ua, sbv) _mm512_dpbusd_epi32(isum, ua, sbv)
#define TG_DOT64_BW(isum, ua, sbv) _mm512_add_epi32(isum, _mm512_madd_epi16(_mm512_maddubs_epi16(ua, sbv), ones))
// The function body for both (a macro, not a template: a template instance takes no target attribute).
// Even and odd groups go to two accumulators, so two FMA chains overlap.
#define TG_DOT_Q_512(NAME, ATTR, DOT64)                                                                        \
  ATTR float NAME(const int8_t* a, const float* sa, const int8_t* b, const float* sb, int64_t cols,             \
                  int64_t group) {                                                                             \
    const int64_t full = cols / group;                                                                         \
    [[maybe_unused]] const __m512i ones = _mm512_set1_epi16(1);                                                \
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};                                                \
    for (int64_t g = 0; g < full; ++g) {                                                                       \
      const int8_t *pa = a + g * group, *pb = b + g * group;                                                   \
      __m512i isum = _mm512_setzero_si512();                                                                   \
      for (int64_t k = 0; k < group; k += 64) {                                                                \
        const __m512i va = _mm512_loadu_si512(pa + k), vb = _mm512_loadu_si512(pb + k);                        \
        const __m512i ua = _mm512_abs_epi8(va);                                                                \
        const __m512i sbv = _mm512_mask_sub_epi8(vb, _mm512_movepi8_mask(va), _mm512_setzero_si512(), vb);     \
        isum = DOT64(isum, ua, sbv);                                                                           \
      }                                                                                                        \
      acc[g & 1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(sa[g] * sb[g]), acc[g & 1]);     \
    }                                                                                                          \
    return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1])) + tail_q_512(a, sa, b, sb, cols, group);        \
  }
TG_DOT_Q_512(dot_q_avx512, TG_AVX512, TG_DOT64_BW)
TG_DOT_Q_512(dot_q_vnni, TG_AVX512_VNNI, TG_DOT64_VNNI)

TG_AVX512 float dot_f_avx512(const float* x, const int8_t* b, const float* sb, int64_t cols, int64_t group) {
  const int64_t full = cols / group;
  __m512 acc = _mm512_setzero_ps();
  for (int64_t g = 0; g < full; ++g) {
    const float* px = x + g * group;
    const int8_t* pb = b + g * group;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    for (int64_t k = 0; k < group; k += 32) {
      const __m512 w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + k))));
      const __m512 w1 =
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pb + k + 16))));
      s0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(px + k), s0);
      s1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(px + k + 16), s1);
    }
    acc = _mm512_fmadd_ps(_mm512_add_ps(s0, s1), _mm512_set1_ps(sb[g]), acc);
  }
  return _mm512_reduce_add_ps(acc) + tail_f(x, b, sb, cols, group);
}
#endif

// Rows [n0, n1) of w against one activation row, through a dot product above (inlined: no call per row).
#define TG_ROWS(NAME_Q, NAME_F, ATTR, DOT_Q, DOT_F)                                                          \
  ATTR void NAME_Q(const int8_t* a, const float* sa, const Int8Matrix& w, int64_t n0, int64_t n1, float* y) { \
    const int64_t K = w.cols, G = w.group, gpr = w.groups_per_row();                                        \
    for (int64_t n = n0; n < n1; ++n) y[n] = DOT_Q(a, sa, w.q.data() + n * K, w.scales.data() + n * gpr, K, G); \
  }                                                                                                         \
  ATTR void NAME_F(const float* x, const Int8Matrix& w, int64_t n0, int64_t n1, float* y) {                 \
    const int64_t K = w.cols, G = w.group, gpr = w.groups_per_row();                                        \
    for (int64_t n = n0; n < n1; ++n) y[n] = DOT_F(x, w.q.data() + n * K, w.scales.data() + n * gpr, K, G);  \
  }
TG_ROWS(rows_q_portable, rows_f_portable, , dot_q_portable, dot_f_portable)
#if defined(__x86_64__)
TG_ROWS(rows_q_avx2, rows_f_avx2, TG_AVX2, dot_q_avx2, dot_f_avx2)
TG_ROWS(rows_q_avx512, rows_f_avx512, TG_AVX512, dot_q_avx512, dot_f_avx512)
TG_ROWS(rows_q_vnni, rows_f_vnni, TG_AVX512_VNNI, dot_q_vnni, dot_f_avx512)  // no VNNI for float activations
#endif


// The kernels of a path for groups of this size (the path must fit it: int8_matmul checks).
cpu::Int8RowKernels kernels_for(Int8Path p, int64_t group) {
  if (group % cpu::path_step(p) != 0) return cpu::small_group_kernels(p);
  switch (p) {
#if defined(__x86_64__)
    case Int8Path::Avx2: return {rows_q_avx2, rows_f_avx2};
    case Int8Path::Avx512: return {rows_q_avx512, rows_f_avx512};
    case Int8Path::Avx512Vnni: return {rows_q_vnni, rows_f_vnni};
#else
    case Int8Path::Avx2:
    case Int8Path::Avx512:
    case Int8Path::Avx512Vnni:
#endif
    case Int8Path::Auto:
    case Int8Path::Portable: break;
  }
  return {rows_q_portable, rows_f_portable};
}

bool path_fits(Int8Path p, int64_t group) { return group % cpu::path_step(p) == 0 || cpu::small_group_fits(p, group); }

struct CpuFeatures {
  bool avx2 = false, avx512 = false, vnni = false;
};
CpuFeatures read_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  f.vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
#endif
  return f;
}

}  // namespace

const char* int8_path_name(Int8Path p) {
  switch (p) {
    case Int8Path::Auto: return "auto";
    case Int8Path::Portable: return "portable";
    case Int8Path::Avx2: return "avx2";
    case Int8Path::Avx512: return "avx512";
    case Int8Path::Avx512Vnni: return "avx512-vnni";
  }
  return "?";
}

bool int8_path_supported(Int8Path p) {
  static const CpuFeatures f = read_cpu_features();
  switch (p) {
    case Int8Path::Avx2: return f.avx2;
    case Int8Path::Avx512: return f.avx512;
    case Int8Path::Avx512Vnni: return f.vnni;
    case Int8Path::Auto:
    case Int8Path::Portable: return true;
  }
  return false;
}

Int8Path int8_resolve_path(Int8Path p, int64_t group) {
  if (p != Int8Path::Auto) return p;
  // Whole groups first (a group of 32 stays on AVX2's exact group sums), then the small-group kernels.
  for (bool small : {false, true})
    for (Int8Path c : {Int8Path::Avx512Vnni, Int8Path::Avx512, Int8Path::Avx2})
      if ((small ? cpu::small_group_fits(c, group) : group % cpu::path_step(c) == 0) && int8_path_supported(c)) return c;
  return Int8Path::Portable;
}

void int8_matmul(const float* x, int64_t m, const Int8Matrix& w, float* y, Int8Activations activations,
                 Int8Path path) {
  check_int8_matrix(w, "int8_matmul");
  TG_CHECK(m >= 0, "int8_matmul: {} rows", m);
  path = int8_resolve_path(path, w.group);
  TG_CHECK(int8_path_supported(path), "int8_matmul: this CPU cannot run the {} path", int8_path_name(path));
  TG_CHECK(path_fits(path, w.group),
           "int8_matmul: the {} path needs groups of a multiple of {}, or of 4 to {} dividing it, not {}",
           int8_path_name(path), cpu::path_step(path), cpu::path_step(path) / 2, w.group);
  if (m == 0) return;
  const int64_t N = w.rows, K = w.cols, G = w.group, gpr = w.groups_per_row();
  const cpu::Int8RowKernels kern = kernels_for(path, w.group);
  // Rows per block: the weights of a block (about 16 KB) stay in L1 while every row of x runs against them.
  const int64_t block = std::max<int64_t>(1, 16384 / K);
  // About 64K multiply-adds per chunk of output rows before a second thread is worth waking.
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, K * m));
  if (activations == Int8Activations::Quantized) {
    // The calling thread's buffers, reused from call to call (no allocation per decoded token).
    thread_local std::vector<int8_t> qx;
    thread_local std::vector<float> sx;
    qx.resize(size_t(m * K));
    sx.resize(size_t(m * gpr));
    // Plain pointers: inside the parallel region the name qx would mean each worker's own buffer.
    int8_t* qxp = qx.data();
    float* sxp = sx.data();
    cpu::parallel_for(m, std::max<int64_t>(1, 65536 / K), [&](int64_t b, int64_t e) {
      cpu::quantize_rows(x + b * K, e - b, K, G, qxp + b * K, sxp + b * gpr);
    });
    cpu::parallel_for(N, grain, [&](int64_t b, int64_t e) {
      for (int64_t n = b; n < e; n += block)
        for (int64_t i = 0; i < m; ++i) kern.q(qxp + i * K, sxp + i * gpr, w, n, std::min(e, n + block), y + i * N);
    });
  } else {
    cpu::parallel_for(N, grain, [&](int64_t b, int64_t e) {
      for (int64_t n = b; n < e; n += block)
        for (int64_t i = 0; i < m; ++i) kern.f(x + i * K, w, n, std::min(e, n + block), y + i * N);
    });
  }
}

}  // namespace tapegrad::kernels
