// fused_attention.cpp — CPU causal attention, forward and backward, without the [T, T] matrices.
//
// For one head (q [T, D], k and v [T, D], scale s = 1/√D), a query row t sees keys j ≤ t:
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
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/fast_math.h"

#include <omp.h>

namespace tapegrad::kernels::cpu {
namespace {

constexpr int64_t kBlock = 64;

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

// The sizes of one call: q [B, H, T, D], k and v [B, Hkv, T, D], G = H / Hkv query heads per kv head.
struct AttentionSizes {
  int64_t B, H, T, D, Hkv, G;
};
AttentionSizes sizes_of(const TensorView& q, const TensorView& k) {
  return {q.shape[0], q.shape[1], q.shape[2], q.shape[3], k.shape[1], q.shape[1] / k.shape[1]};
}

// Runs task(b, kv, scratch) for every (batch, kv head) pair over the OpenMP threads.
template <class T, class F>
void for_each_kv_head(int64_t B, int64_t Hkv, size_t scratch_elems, F&& task) {
  const int64_t n = B * Hkv;
  const int nt = omp_in_parallel() ? 1 : static_cast<int>(std::min<int64_t>(omp_get_max_threads(), n));
#pragma omp parallel num_threads(nt)
  {
    std::vector<T> scratch(scratch_elems);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) task(i / Hkv, i % Hkv, scratch.data());
  }
}

}  // namespace

void CpuBackend::causal_attention(const TensorView& out, const TensorView& lse, const TensorView& q,
                                  const TensorView& k, const TensorView& v, double scale) {
  dispatch_floating(q.dtype, "causal_attention", [&](auto tag) {
    using T = decltype(tag);
    const auto [B, H, Tn, D, Hkv, G] = sizes_of(q, k);
    const auto Q = head_view<T>(q), K = head_view<T>(k), V = head_view<T>(v), O = head_view<T>(out);
    const auto L = head_view<T>(lse);
    for_each_kv_head<T>(B, Hkv, size_t(kBlock * Tn), [&](int64_t b, int64_t kv, T* S) {
      const T* kp = K.at(b, kv);
      const T* vp = V.at(b, kv);
      for (int64_t g = 0; g < G; ++g) {
        const int64_t h = kv * G + g;
        const T* qp = Q.at(b, h);
        T* op = O.at(b, h);
        T* lp = L.at(b, h);
        for (int64_t r0 = 0; r0 < Tn; r0 += kBlock) {
          const int64_t r1 = std::min(Tn, r0 + kBlock), rows = r1 - r0;
          // S[rows, r1] = s · Q[r0:r1] K[0:r1]ᵀ
          gemm(false, true, rows, r1, D, scale, qp + r0 * Q.st, Q.st, kp, K.st, 0.0, S, Tn);
          for (int64_t i = 0; i < rows; ++i) {
            T* srow = S + i * Tn;
            const int64_t n = r0 + i + 1;  // keys 0..t
            T m = -std::numeric_limits<T>::infinity();
            for (int64_t j = 0; j < n; ++j) m = std::max(m, srow[j]);
            T sum = 0;
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < n; ++j) {
              const T e = exp_of(srow[j] - m);
              srow[j] = e;
              sum += e;
            }
            const T inv = T(1) / sum;
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) srow[j] *= inv;
            std::fill(srow + n, srow + r1, T(0));  // masked keys of this block
            lp[(r0 + i) * L.st] = m + std::log(sum);
          }
          // O[r0:r1] = P[rows, r1] V[0:r1]
          gemm(false, false, rows, D, r1, 1.0, S, Tn, vp, V.st, 0.0, op + r0 * O.st, O.st);
        }
      }
    });
  });
}

void CpuBackend::causal_attention_backward(const TensorView& grad_q, const TensorView& grad_k,
                                           const TensorView& grad_v, const TensorView& grad_out, const TensorView& q,
                                           const TensorView& k, const TensorView& v, const TensorView& out,
                                           const TensorView& lse, double scale) {
  dispatch_floating(q.dtype, "causal_attention_backward", [&](auto tag) {
    using T = decltype(tag);
    const auto [B, H, Tn, D, Hkv, G] = sizes_of(q, k);
    const auto Q = head_view<T>(q), K = head_view<T>(k), V = head_view<T>(v), O = head_view<T>(out);
    const auto dQ = head_view<T>(grad_q), dK = head_view<T>(grad_k), dV = head_view<T>(grad_v);
    const auto dO = head_view<T>(grad_out);
    const auto L = head_view<T>(lse);
    // scratch: P and dP/dS blocks [kBlock, T], and D_t for the block
    for_each_kv_head<T>(B, Hkv, size_t(2 * kBlock * Tn + kBlock), [&](int64_t b, int64_t kv, T* scratch) {
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
