// matmul.cpp — CPU matmul on OpenBLAS: out[..., M, N] (+)= a[..., M, K] @ b[..., K, N].
//
// A strided matrix goes to BLAS without a copy when one of its dims is unit-stride:
//   row-major   (strides [ld, 1]) → CblasNoTrans with leading dim ld
//   column-major (strides [1, ld]) → CblasTrans   with leading dim ld   (e.g. a .transpose() view)
// Only a matrix with neither (broadcast rows, a slice with a step) is copied first.
// Batches: one threaded BLAS call per matrix when matrices are large; when they are small and
// many (attention heads), threads split the batches and each BLAS call runs on one thread.
// A single row (M = 1: a Linear layer on one token while generating) is a matrix-vector product:
// BLAS gemv streams the matrix once, where gemm with M = 1 first packs it (5–10× slower at the
// sizes of a small LM, bench/README.md); small ones run on our own loop (small_gemv).
#include <cblas.h>

#include <vector>

#include <omp.h>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/nd_loop.h"
#include "kernels/cpu/parallel.h"

namespace tapegrad::kernels::cpu {
namespace {

struct BlasMatrix {
  CBLAS_TRANSPOSE trans = CblasNoTrans;
  int64_t ld = 1;
  bool direct = false;  // false: must be copied to a contiguous buffer first
};

BlasMatrix blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= std::max<int64_t>(cols, 1)))
    return {CblasNoTrans, rows <= 1 ? std::max<int64_t>(cols, 1) : rs, true};
  if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= std::max<int64_t>(rows, 1)))
    return {CblasTrans, cols <= 1 ? std::max<int64_t>(rows, 1) : cs, true};
  return {};
}

inline void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}
inline void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t M, int64_t N, int64_t K, const double* A,
                 int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, A, lda, B, ldb, beta, C, ldc);
}
// y (+)= op(A) x with A stored row-major [rows, cols] (leading dim lda), strided x and y.
inline void gemv(CBLAS_TRANSPOSE ta, int64_t rows, int64_t cols, const float* A, int64_t lda, const float* x,
                 int64_t incx, float beta, float* y, int64_t incy) {
  cblas_sgemv(CblasRowMajor, ta, rows, cols, 1.0f, A, lda, x, incx, beta, y, incy);
}
inline void gemv(CBLAS_TRANSPOSE ta, int64_t rows, int64_t cols, const double* A, int64_t lda, const double* x,
                 int64_t incx, double beta, double* y, int64_t incy) {
  cblas_dgemv(CblasRowMajor, ta, rows, cols, 1.0, A, lda, x, incx, beta, y, incy);
}

// Up to this many multiply-adds (128 KiB of float32 weights, L2-resident) a matrix-vector product
// runs on our own loop, on the calling thread: OpenBLAS's gemv costs more per call at these sizes
// (and forks its threads above 9,216 elements, which costs more than the product itself).
constexpr double kSmallGemv = 32768;

// y[n] (+)= Σ_k x[k] W[n, k] for W stored row-major [N, K] (leading dim ldw), x contiguous: four rows
// at a time, each a vectorized dot product.
template <class T>
void small_gemv(T* y, int64_t incy, const T* x, const T* W, int64_t ldw, int64_t N, int64_t K, bool accumulate) {
  int64_t n = 0;
  for (; n + 4 <= N; n += 4) {
    const T *w0 = W + n * ldw, *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;
    T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int64_t k = 0; k < K; ++k) {
      s0 += x[k] * w0[k];
      s1 += x[k] * w1[k];
      s2 += x[k] * w2[k];
      s3 += x[k] * w3[k];
    }
    const T s[4] = {s0, s1, s2, s3};
    for (int u = 0; u < 4; ++u) y[(n + u) * incy] = (accumulate ? y[(n + u) * incy] : T(0)) + s[u];
  }
  for (; n < N; ++n) {
    const T* w = W + n * ldw;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t k = 0; k < K; ++k) sum += x[k] * w[k];
    y[n * incy] = (accumulate ? y[n * incy] : T(0)) + sum;
  }
}

// out[1, N] (+)= a[1, K] @ b[K, N] for a b that BLAS reads directly (layout lb), as one gemv:
//   b stored [N, K] (a transposed view, as Linear's Wᵀ): y = B_stored · a   (NoTrans, N × K)
//   b stored [K, N] (row-major):                          y = B_storedᵀ · a  (Trans,   K × N)
// Strides of 0 (a broadcast a or out) are not valid BLAS increments: the caller packs those.
template <class T>
void row_times_matrix(T* C, int64_t ocs, const T* A, int64_t acs, const T* B, const BlasMatrix& lb, int64_t N,
                      int64_t K, bool accumulate) {
  if (lb.trans == CblasTrans && acs == 1 && double(N) * double(K) <= kSmallGemv) {
    small_gemv(C, ocs, A, B, lb.ld, N, K, accumulate);
    return;
  }
  if (!accumulate)  // BLAS may read y even with beta = 0 (0 · NaN): start from zeros
    for (int64_t j = 0; j < N; ++j) C[j * ocs] = T(0);
  if (lb.trans == CblasTrans) gemv(CblasNoTrans, N, K, B, lb.ld, A, acs, T(1), C, ocs);
  else gemv(CblasTrans, K, N, B, lb.ld, A, acs, T(1), C, ocs);
}

// Copies a strided rows×cols matrix into a dense row-major buffer.
template <class T>
void pack(std::vector<T>& buf, const T* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  buf.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) buf[i * cols + j] = p[i * rs + j * cs];
}

template <class T>
void matmul_typed(const TensorView& out, const TensorView& a, const TensorView& b, bool accumulate) {
  const int nd = out.ndim();
  const int64_t M = out.shape[nd - 2], N = out.shape[nd - 1], K = a.shape[nd - 1];
  const int64_t ars = a.strides[nd - 2], acs = a.strides[nd - 1];
  const int64_t brs = b.strides[nd - 2], bcs = b.strides[nd - 1];
  const int64_t ors = out.strides[nd - 2], ocs = out.strides[nd - 1];
  const BlasMatrix la = blas_layout(M, K, ars, acs), lb = blas_layout(K, N, brs, bcs);
  const BlasMatrix lo = blas_layout(M, N, ors, ocs);
  const bool out_direct = lo.direct && lo.trans == CblasNoTrans;

  Shape batch(out.shape.begin(), out.shape.end() - 2);
  Shape sa(a.strides.begin(), a.strides.end() - 2), sb(b.strides.begin(), b.strides.end() - 2),
      so(out.strides.begin(), out.strides.end() - 2);
  NdLoop<3> loop(batch, {{out.data, &so, sizeof(T)}, {a.data, &sa, sizeof(T)}, {b.data, &sb, sizeof(T)}});
  const int64_t n_batch = loop.numel();
  if (M == 0 || N == 0 || n_batch == 0) return;

  auto one = [&](T* C, const T* A, const T* B) {
    if (K == 0) {
      if (!accumulate)
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) C[i * ors + j * ocs] = T(0);
      return;
    }
    if (M == 1 && lb.direct && (K == 1 || acs > 0) && (N == 1 || ocs > 0)) {
      row_times_matrix(C, N == 1 ? 1 : ocs, A, K == 1 ? 1 : acs, B, lb, N, K, accumulate);
      return;
    }
    std::vector<T> pa, pb, pc;
    BlasMatrix ma = la, mb = lb;
    if (!ma.direct) pack(pa, A, M, K, ars, acs), A = pa.data(), ma = {CblasNoTrans, K, true};
    if (!mb.direct) pack(pb, B, K, N, brs, bcs), B = pb.data(), mb = {CblasNoTrans, N, true};
    if (out_direct) {
      gemm(ma.trans, mb.trans, M, N, K, A, ma.ld, B, mb.ld, accumulate ? T(1) : T(0), C, lo.ld);
      return;
    }
    if (accumulate) pack(pc, C, M, N, ors, ocs);
    else pc.assign(static_cast<size_t>(M * N), T(0));
    gemm(ma.trans, mb.trans, M, N, K, A, ma.ld, B, mb.ld, accumulate ? T(1) : T(0), pc.data(), N);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ors + j * ocs] = pc[i * N + j];
  };
  auto run_range = [&](int64_t begin, int64_t end) {
    loop.run(begin, end, [&](char** p, int64_t n, const int64_t* s) {
      for (int64_t i = 0; i < n; ++i)
        one(reinterpret_cast<T*>(p[0] + i * s[0]), reinterpret_cast<const T*>(p[1] + i * s[1]),
            reinterpret_cast<const T*>(p[2] + i * s[2]));
    });
  };
  // Small matrices, many of them: one BLAS thread each, threads over batches (an output
  // batch stride of 0 would make batches write the same matrix, so that case stays serial).
  bool out_shared = false;
  for (int d = 0; d < batch.size(); ++d) out_shared |= batch[d] > 1 && so[d] == 0;
  // Medium ones (up to 128·128·512 multiply-adds, Muon's Newton–Schulz over a model's matrices) too, when there
  // are at least two per thread: a threaded BLAS call on a 128-wide matrix barely scales past one thread.
  const double mnk = double(M) * double(N) * double(K);
  const bool small = mnk < 128.0 * 128.0 * 128.0 ||
                     (mnk <= 128.0 * 128.0 * 512.0 && n_batch >= 2 * int64_t(omp_get_max_threads()));
  if (n_batch > 1 && small && !out_shared) parallel_for(n_batch, 1, run_range);
  else run_range(0, n_batch);
}

}  // namespace

void CpuBackend::matmul(const TensorView& out, const TensorView& a, const TensorView& b, bool accumulate) {
  dispatch_floating(out.dtype, "matmul", [&](auto t) {
    using T = decltype(t);
    matmul_typed<T>(out, a, b, accumulate);
  });
}

}  // namespace tapegrad::kernels::cpu
