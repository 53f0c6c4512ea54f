// fused_attention.cpp — CPU causal attention, forward and backward, without the [T, T] matrices.
//
// For one head (q [T, D], k and v [T, D], scale s = 1/√D), a query row t sees keys j ≤ t.
// The forward also takes a longer key/value sequence (a KV cache: k, v [Tk, D], Tk ≥ T): the T
// queries are then the last T positions and query t sees keys j ≤ t + (Tk − T). Decoding one token
// (T = 1, a few heads) is too small for BLAS: rows below kDirectRows go through plain loops.
//   S_tj = s · q_t·k_j,   P_tj = exp(S_tj − lse_t),   lse_t = log Σ_{j≤t} exp(S_tj),   o_t = Σ_j P_tj v_j
// Backward (g = dL/do):  D_t = g_t·o_t,  dP_tj = g_t·v_j,  dS_tj = P_tj (dP_tj − D_t)
//   dq_t = s Σ_j dS_tj k_j,   dk_j = s Σ_t dS_tj q_t,   dv_j = Σ_t P_tj g_t
// Queries are processed in blocks of kBlock rows: block [r0, r1) needs keys [0, r1) only, so the
// upper triangle is (mostly) skipped, and each block's scores live in a kBlock × T scratch buffer
// per thread. Only lse [T] per head is saved; backward recomputes P from it (one extra Q·Kᵀ per
// block) instead of keeping B·H·T² probabilities alive between forward and backward.
// Grouped-query attention: query head h reads kv head h / G (G = H / Hkv). Work is split over
// (batch, kv head) pairs, so the G query heads that write one kv head's dk/dv run on one thread:
// no races, and results do not depend on the thread count.
// All matrix products are BLAS calls on row-major blocks (rows may be strided: the T stride is
// BLAS's leading dimension; the D stride must be 1). Inside the OpenMP region OpenBLAS runs
// single-threaded.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/fast_math.h"

#include <omp.h>

namespace tapegrad::kernels::cpu {
namespace {

constexpr int64_t kBlock = 64;
// Query blocks of fewer rows than this skip BLAS (whose per-call cost and packing dominate there).
constexpr int64_t kDirectRows = 4;
// Below this many multiply-adds a call runs on the calling thread (an OpenMP fork costs more).
constexpr double kParallelWork = 1 << 16;

// C[M, N] = alpha · op(A) · op(B) + beta · C, row-major, for float and double.
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, double beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              float(alpha), a, int(lda), b, int(ldb), float(beta), c, int(ldc));
}
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

inline float exp_of(float x) { return fast_exp(x); }
inline double exp_of(double x) { return std::exp(x); }

// S[j] ← exp(S[j] − m) for j < n; returns Σ_j S[j] (vectorized: see -fno-trapping-math in CMakeLists).
inline float exp_shifted_sum(float* S, int64_t n, float m) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    const float e = fast_exp(S[j] - m);
    S[j] = e;
    sum += e;
  }
  return sum;
}
inline double exp_shifted_sum(double* S, int64_t n, double m) {
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    S[j] = std::exp(S[j] - m);
    sum += S[j];
  }
  return sum;
}

// The [B, H, T, D] (or [B, H, T] for lse) view of one tensor: pointer to (b, h, 0, …) and the T stride.
template <class T>
struct HeadView {
  T* base;
  int64_t sb, sh, st;
  T* at(int64_t b, int64_t h) const { return base + b * sb + h * sh; }
};
template <class T>
HeadView<T> head_view(const TensorView& v) {
  return {static_cast<T*>(v.data), v.strides[0], v.strides[1], v.strides[2]};
}

// The sizes of one call: q [B, H, T, D], k and v [B, Hkv, Tk, D], G = H / Hkv query heads per kv
// head; query t sees keys j ≤ t + offset, offset = Tk − T (0 in training).
struct AttentionSizes {
  int64_t B, H, T, D, Hkv, G, Tk, offset;
};
AttentionSizes sizes_of(const TensorView& q, const TensorView& k) {
  return {q.shape[0], q.shape[1], q.shape[2], q.shape[3], k.shape[1], q.shape[1] / k.shape[1],
          k.shape[2], k.shape[2] - q.shape[2]};
}

// A thread's scratch buffer of at least n elements, kept between calls (decoding calls this once per
// layer and token with one more key each time: it grows by doubling, so almost never reallocates).
template <class T>
T* thread_scratch(size_t n) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < n) buffer.resize(std::max(n, 2 * buffer.size()));  // doubling: O(log T) growths
  return buffer.data();
}

// Runs task(b, kv, scratch) for every (batch, kv head) pair, over the OpenMP threads when the call
// has `work` ≥ kParallelWork multiply-adds.
template <class T, class F>
void for_each_kv_head(int64_t B, int64_t Hkv, size_t scratch_elems, double work, F&& task) {
  const int64_t n = B * Hkv;
  const int nt = omp_in_parallel() || work < kParallelWork
                     ? 1
                     : static_cast<int>(std::min<int64_t>(omp_get_max_threads(), n));
  if (nt == 1) {
    T* scratch = thread_scratch<T>(scratch_elems);
    for (int64_t i = 0; i < n; ++i) task(i / Hkv, i % Hkv, scratch);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    T* scratch = thread_scratch<T>(scratch_elems);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) task(i / Hkv, i % Hkv, scratch);
  }
}

// S[j] = scale · q·k_j for j < n (k_j = kp + j·kst). With AVX and a float head size that is a
// multiple of 8, eight keys at a time: their products with q are summed across lanes by a
// horizontal-add tree, one vector of 8 scores (a dot product per key would end in its own
// horizontal reduction, which costs more than the multiply-adds when D = 8).
// Returns max_j S[j] (a NaN score is not propagated into it; the exp of NaN is NaN either way).
template <class T, int kD>
T scores_of(T* S, const T* q, const T* kp, int64_t kst, int64_t n, int64_t D, T scale) {
  int64_t j = 0;
  T m = -std::numeric_limits<T>::infinity();
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float> && kD > 0 && kD % 8 == 0) {
    const __m256 s = _mm256_set1_ps(scale);
    __m256 vmax = _mm256_set1_ps(m);
    for (; j + 8 <= n; j += 8) {
      __m256 p[8];
      for (int r = 0; r < 8; ++r) {
        const float* kr = kp + (j + r) * kst;
        __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(kr));
        for (int c = 8; c < kD; c += 8) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(kr + c)));
        p[r] = acc;
      }
      // hadd pairs twice: lane i of each 128-bit half holds partial sums of key i (low half) / i (high)
      const __m256 h01 = _mm256_hadd_ps(p[0], p[1]), h23 = _mm256_hadd_ps(p[2], p[3]);
      const __m256 h45 = _mm256_hadd_ps(p[4], p[5]), h67 = _mm256_hadd_ps(p[6], p[7]);
      const __m256 h0123 = _mm256_hadd_ps(h01, h23), h4567 = _mm256_hadd_ps(h45, h67);
      const __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
                                        _mm256_permute2f128_ps(h0123, h4567, 0x31));
      const __m256 scores = _mm256_mul_ps(s, sums);
      _mm256_storeu_ps(S + j, scores);
      vmax = _mm256_max_ps(vmax, scores);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, vmax);
    for (float x : lanes) m = std::max(m, x);
  }
#endif
  for (; j < n; ++j) {
    const T* kj = kp + j * kst;
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < D; ++c) dot += q[c] * kj[c];
    S[j] = scale * dot;
    m = std::max(m, S[j]);
  }
  return m;
}

// o[0:D] = Σ_{j<n} p_j v_j (v_j = vp + j·vst). With D known and small (8, 16), one accumulator
// would chain every key's add behind the previous one: four partial sums, keys j ≡ 0..3 (mod 4).
template <class T, int kD>
void weighted_sum(T* o, const T* p, const T* vp, int64_t vst, int64_t n, int64_t D) {
  std::fill(o, o + D, T(0));
  int64_t j = 0;
  if constexpr (kD > 0 && kD <= 16) {
    T acc[4][kD] = {};
    for (; j + 4 <= n; j += 4)
      for (int u = 0; u < 4; ++u) {
        const T pj = p[j + u];
        const T* vj = vp + (j + u) * vst;
#pragma omp simd
        for (int c = 0; c < kD; ++c) acc[u][c] += pj * vj[c];
      }
#pragma omp simd
    for (int c = 0; c < kD; ++c) o[c] = (acc[0][c] + acc[1][c]) + (acc[2][c] + acc[3][c]);
  }
  for (; j < n; ++j) {
    const T pj = p[j];
    const T* vj = vp + j * vst;
#pragma omp simd
    for (int64_t c = 0; c < D; ++c) o[c] += pj * vj[c];
  }
}

// One query row without BLAS: o = Σ_{j<n} softmax_j(s · q·k_j) v_j, returns lse. S: n scratch elements.
// kD > 0 is the head size known at compile time (the loops over it unroll into a few vector
// instructions: a 64-dim model's heads have D = 8, and a runtime-length loop per key costs more than
// its 8 multiply-adds); kD = 0 takes D at run time.
template <class T, int kD>
T attend_row(T* o, const T* q, const T* kp, int64_t kst, const T* vp, int64_t vst, int64_t n, int64_t D_runtime,
             T scale, T* S) {
  const int64_t D = kD > 0 ? kD : D_runtime;
  const T m = scores_of<T, kD>(S, q, kp, kst, n, D, scale);
  const T sum = exp_shifted_sum(S, n, m);
  weighted_sum<T, kD>(o, S, vp, vst, n, D);
  const T inv = T(1) / sum;
#pragma omp simd
  for (int64_t c = 0; c < D; ++c) o[c] *= inv;
  return m + std::log(sum);
}

// attend_row for this head size: compiled for the common ones, else at run time.
template <class T>
using AttendRow = T (*)(T*, const T*, const T*, int64_t, const T*, int64_t, int64_t, int64_t, T, T*);
template <class T>
AttendRow<T> attend_row_for(int64_t D) {
  switch (D) {
    case 8: return &attend_row<T, 8>;
    case 16: return &attend_row<T, 16>;
    case 32: return &attend_row<T, 32>;
    case 64: return &attend_row<T, 64>;
    case 128: return &attend_row<T, 128>;
    default: return &attend_row<T, 0>;
  }
}

}  // namespace

void CpuBackend::causal_attention(const TensorView& out, const TensorView& lse, const TensorView& q,
                                  const TensorView& k, const TensorView& v, double scale) {
  dispatch_floating(q.dtype, "causal_attention", [&](auto tag) {
    using T = decltype(tag);
    // Plain variables, not a structured binding: the lambdas below capture them (clang < 16 and
    // OpenMP regions in clang 19 cannot capture a structured binding).
    const AttentionSizes z = sizes_of(q, k);
    const int64_t B = z.B, H = z.H, Tn = z.T, D = z.D, Hkv = z.Hkv, G = z.G, Tk = z.Tk, off = z.offset;
    const auto Q = head_view<T>(q), K = head_view<T>(k), V = head_view<T>(v), O = head_view<T>(out);
    const auto L = head_view<T>(lse);
    const double work = double(B) * double(H) * double(Tn) * double(Tk) * double(std::max<int64_t>(D, 1));
    for_each_kv_head<T>(B, Hkv, size_t(kBlock * Tk), work, [&](int64_t b, int64_t kv, T* S) {
      const T* kp = K.at(b, kv);
      const T* vp = V.at(b, kv);
      for (int64_t g = 0; g < G; ++g) {
        const int64_t h = kv * G + g;
        const T* qp = Q.at(b, h);
        T* op = O.at(b, h);
        T* lp = L.at(b, h);
        for (int64_t r0 = 0; r0 < Tn; r0 += kBlock) {
          const int64_t r1 = std::min(Tn, r0 + kBlock), rows = r1 - r0, keys = r1 + off;
          if (rows < kDirectRows) {
            const AttendRow<T> attend = attend_row_for<T>(D);
            for (int64_t t = r0; t < r1; ++t)
              lp[t * L.st] = attend(op + t * O.st, qp + t * Q.st, kp, K.st, vp, V.st, t + off + 1, D, T(scale), S);
            continue;
          }
          // S[rows, keys] = s · Q[r0:r1] K[0:keys]ᵀ
          gemm(false, true, rows, keys, D, scale, qp + r0 * Q.st, Q.st, kp, K.st, 0.0, S, Tk);
          for (int64_t i = 0; i < rows; ++i) {
            T* srow = S + i * Tk;
            const int64_t n = r0 + i + 1 + off;  // keys 0..t + offset
            T m = -std::numeric_limits<T>::infinity();
            for (int64_t j = 0; j < n; ++j) m = std::max(m, srow[j]);
            const T sum = exp_shifted_sum(srow, n, m);
            const T inv = T(1) / sum;
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) srow[j] *= inv;
            std::fill(srow + n, srow + keys, T(0));  // masked keys of this block
            lp[(r0 + i) * L.st] = m + std::log(sum);
          }
          // O[r0:r1] = P[rows, keys] V[0:keys]
          gemm(false, false, rows, D, keys, 1.0, S, Tk, vp, V.st, 0.0, op + r0 * O.st, O.st);
        }
      }
    });
  });
}

// The first L = key_count[0] keys of the cache (the host reads the count: CPU memory), then the call above.
void CpuBackend::causal_attention_prefix(const TensorView& out, const TensorView& lse, const TensorView& q,
                                         const TensorView& k, const TensorView& v, const TensorView& key_count,
                                         double scale) {
  TG_CHECK(key_count.dtype == DType::Int64 && key_count.numel() == 1,
           "causal_attention_prefix: the key count must be one int64, got {} {}", key_count.dtype, key_count.shape);
  TG_CHECK(q.ndim() == 4 && k.ndim() == 4 && v.ndim() == 4, "causal_attention_prefix: q, k, v must be 4-d");
  const int64_t L = *static_cast<const int64_t*>(key_count.data), T = q.shape[2], Tc = k.shape[2];
  TG_CHECK(L >= T && L <= Tc, "causal_attention_prefix: key count {} is outside [T, Tc] = [{}, {}]", L, T, Tc);
  TensorView k_first = k, v_first = v;
  k_first.shape[2] = L;
  v_first.shape[2] = L;
  causal_attention(out, lse, q, k_first, v_first, scale);
}

void CpuBackend::causal_attention_backward(const TensorView& grad_q, const TensorView& grad_k,
                                           const TensorView& grad_v, const TensorView& grad_out, const TensorView& q,
                                           const TensorView& k, const TensorView& v, const TensorView& out,
                                           const TensorView& lse, double scale) {
  dispatch_floating(q.dtype, "causal_attention_backward", [&](auto tag) {
    using T = decltype(tag);
    const AttentionSizes z = sizes_of(q, k);  // plain variables: see causal_attention
    const int64_t B = z.B, H = z.H, Tn = z.T, D = z.D, Hkv = z.Hkv, G = z.G, Tk = z.Tk, off = z.offset;
    TG_CHECK(off == 0, "causal_attention_backward: keys ({}) and queries ({}) must have one length", Tk, Tn);
    const auto Q = head_view<T>(q), K = head_view<T>(k), V = head_view<T>(v), O = head_view<T>(out);
    const auto dQ = head_view<T>(grad_q), dK = head_view<T>(grad_k), dV = head_view<T>(grad_v);
    const auto dO = head_view<T>(grad_out);
    const auto L = head_view<T>(lse);
    // scratch: P and dP/dS blocks [kBlock, T], and D_t for the block
    const double work = 3.0 * double(B) * double(H) * double(Tn) * double(Tn) * double(std::max<int64_t>(D, 1));
    for_each_kv_head<T>(B, Hkv, size_t(2 * kBlock * Tn + kBlock), work, [&](int64_t b, int64_t kv, T* scratch) {
      T* P = scratch;
      T* dS = scratch + kBlock * Tn;
      T* Dt = scratch + 2 * kBlock * Tn;
      const T* kp = K.at(b, kv);
      const T* vp = V.at(b, kv);
      T* dkp = dK.at(b, kv);
      T* dvp = dV.at(b, kv);
      for (int64_t j = 0; j < Tn; ++j) {
        std::fill(dkp + j * dK.st, dkp + j * dK.st + D, T(0));
        std::fill(dvp + j * dV.st, dvp + j * dV.st + D, T(0));
      }
      for (int64_t g = 0; g < G; ++g) {
        const int64_t h = kv * G + g;
        const T* qp = Q.at(b, h);
        const T* op = O.at(b, h);
        const T* gp = dO.at(b, h);
        const T* lp = L.at(b, h);
        T* dqp = dQ.at(b, h);
        for (int64_t r0 = 0; r0 < Tn; r0 += kBlock) {
          const int64_t r1 = std::min(Tn, r0 + kBlock), rows = r1 - r0;
          // P = exp(s · Q Kᵀ − lse) on keys ≤ t, 0 above the diagonal
          gemm(false, true, rows, r1, D, scale, qp + r0 * Q.st, Q.st, kp, K.st, 0.0, P, Tn);
          for (int64_t i = 0; i < rows; ++i) {
            T* prow = P + i * Tn;
            const int64_t n = r0 + i + 1;
            const T l = lp[(r0 + i) * L.st];
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) prow[j] = exp_of(prow[j] - l);
            std::fill(prow + n, prow + r1, T(0));
            const T* grow = gp + (r0 + i) * dO.st;
            const T* orow = op + (r0 + i) * O.st;
            T d = 0;
#pragma omp simd reduction(+ : d)
            for (int64_t c = 0; c < D; ++c) d += grow[c] * orow[c];
            Dt[i] = d;
          }
          // dV[0:r1] += Pᵀ dO[r0:r1]
          gemm(true, false, r1, D, rows, 1.0, P, Tn, gp + r0 * dO.st, dO.st, 1.0, dvp, dV.st);
          // dP = dO[r0:r1] V[0:r1]ᵀ, then dS = P ⊙ (dP − D_t)
          gemm(false, true, rows, r1, D, 1.0, gp + r0 * dO.st, dO.st, vp, V.st, 0.0, dS, Tn);
          for (int64_t i = 0; i < rows; ++i) {
            T* srow = dS + i * Tn;
            const T* prow = P + i * Tn;
            const T d = Dt[i];
#pragma omp simd
            for (int64_t j = 0; j < r1; ++j) srow[j] = prow[j] * (srow[j] - d);
          }
          // dQ[r0:r1] = s · dS K[0:r1];   dK[0:r1] += s · dSᵀ Q[r0:r1]
          gemm(false, false, rows, D, r1, scale, dS, Tn, kp, K.st, 0.0, dqp + r0 * dQ.st, dQ.st);
          gemm(true, false, r1, D, rows, scale, dS, Tn, qp + r0 * Q.st, Q.st, 1.0, dkp, dK.st);
        }
      }
    });
  });
}

}  // namespace tapegrad::kernels::cpu
