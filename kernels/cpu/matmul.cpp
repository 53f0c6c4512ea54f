// matmul.cpp — CPU matmul on OpenBLAS: out[..., M, N] (+)= a[..., M, K] @ b[..., K, N].
//
// A strided matrix goes to BLAS without a copy when one of its dims is unit-stride:
//   row-major   (strides [ld, 1]) → CblasNoTrans with leading dim ld
//   column-major (strides [1, ld]) → CblasTrans   with leading dim ld   (e.g. a .transpose() view)
// Only a matrix with neither (broadcast rows, a slice with a step) is copied first.
// Batches: one threaded BLAS call per matrix when matrices are large; when they are small and
// many (attention heads), threads split the batches and each BLAS call runs on one thread.
#include <cblas.h>

#include <vector>

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
  const bool small = double(M) * double(N) * double(K) < 128.0 * 128.0 * 128.0;
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
