// matmul.cu — CUDA matmul: out[..., M, N] (+)= a[..., M, K] @ b[..., K, N], float32 and float64; bfloat16
// through cuBLAS's bf16 GEMM (matmul_bf16_native; the SIMT path takes bf16 widened by the bf16 bridge).
//
// Two implementations behind CudaBackend::matmul (cuda_backend.h: set_matmul_impl):
//
// cuBLAS (nvcc build, the default). cuBLAS is column-major; a row-major matrix X with strides
// [ld, 1] is, read column-major, Xᵀ with leading dimension ld. So row-major C = A·B is computed
// as the column-major Cᵀ = Bᵀ·Aᵀ: gemm(m = N, n = M, k = K, first operand B, second A, C with
// ldc = C's row stride). An operand with strides [1, ld] (a .transpose() view) is column-major
// already and goes in as a transpose flag, never as a copy; an output with strides [1, ld] takes
// the direct form C = A·B. Only a matrix with no unit stride (a slice with a step, broadcast
// rows) is packed into a contiguous scratch buffer first (and the output unpacked after), as the
// CPU backend does. Batch dims are merged where their strides allow; the innermost merged dim is
// one strided-batched call (stride 0 for a broadcast operand), outer ones a host loop of calls.
// TF32 is off unless set_allow_tf32(true).
//
// SIMT (our own kernel; the only one in the emulated build, selectable under nvcc): one block of
// 256 threads computes a 64×64 tile of C for one batch; the K dimension is walked in steps of 16,
// staging a 64×16 tile of A and a 16×64 tile of B in shared memory (loaded with neighbouring
// threads on the operand's unit-stride dim, so both layouts are coalesced), and each thread keeps a
// 4×4 register tile of C (rows ty + 16i, cols tx + 16j). Any strides, odd sizes, accumulate.
// grid = (⌈N/64⌉, ⌈M/64⌉, batches), the last two capped and walked by grid-stride loops.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>

#include "kernels/bfloat16.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/indexer.h"
#include "kernels/cuda/runtime.h"

#if !defined(TAPEGRAD_CUDA_EMULATED)
#include <cublas_v2.h>
#endif

namespace tapegrad::kernels::cuda {
namespace {

// ---------------------------------------------------------------- settings
std::atomic<bool> g_allow_tf32{false};

MatmulImpl impl_from_environment() {
  const char* env = std::getenv("TAPEGRAD_CUDA_MATMUL");
  if (env == nullptr || *env == '\0' || std::strcmp(env, "cublas") == 0) return MatmulImpl::Cublas;
  if (std::strcmp(env, "simt") == 0) return MatmulImpl::Simt;
  throw Error(fmt::format("TAPEGRAD_CUDA_MATMUL={}: expected cublas or simt", env));
}

std::atomic<int>& impl_setting() {
  static std::atomic<int> impl{static_cast<int>(impl_from_environment())};
  return impl;
}

// ---------------------------------------------------------------- the SIMT kernel
constexpr int kTileM = 64, kTileN = 64, kTileK = 16;
constexpr int kThreadTile = 4;                               // each thread: 4×4 outputs
constexpr int kThreadsX = kTileN / kThreadTile;              // 16 threads along N
constexpr int kThreadsY = kTileM / kThreadTile;              // 16 threads along M
constexpr int kMatmulThreads = kThreadsX * kThreadsY;        // 256
constexpr int64_t kMaxGridYZ = 65535;

template <class T>
struct SimtArgs {
  T* out;
  const T* a;
  const T* b;
  int64_t M, N, K;
  int64_t a_rs, a_cs, b_rs, b_cs, o_rs, o_cs;  // row / column strides of each matrix
  Indexer<3> batch;                            // batch index → offsets of out, a, b
  int64_t batch_count;
  bool accumulate;
};

template <class T>
__global__ void simt_matmul_kernel(SimtArgs<T> p) {
  // a_tile[k][m] = A[m0 + m, k0 + k], b_tile[k][n] = B[k0 + k, n0 + n]; +1 column against bank conflicts
  __shared__ T a_tile[kTileK][kTileM + 1];
  __shared__ T b_tile[kTileK][kTileN + 1];
  const int tid = threadIdx.x, tx = tid % kThreadsX, ty = tid / kThreadsX;
  const int64_t tiles_m = (p.M + kTileM - 1) / kTileM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  // Neighbouring threads load neighbouring addresses: along k for a row-major A, along m otherwise;
  // along n for a row-major B, along k otherwise.
  const bool a_along_k = p.a_cs == 1, b_along_n = p.b_cs == 1;

  for (int64_t batch = blockIdx.z; batch < p.batch_count; batch += gridDim.z) {
    int64_t off[3];
    p.batch.offsets(batch, off);
    T* const out = p.out + off[0];
    const T* const a = p.a + off[1];
    const T* const b = p.b + off[2];

    for (int64_t tile_m = blockIdx.y; tile_m < tiles_m; tile_m += gridDim.y) {
      const int64_t m0 = tile_m * kTileM;
      T acc[kThreadTile][kThreadTile];
      for (int i = 0; i < kThreadTile; ++i)
        for (int j = 0; j < kThreadTile; ++j) acc[i][j] = T(0);

      for (int64_t k0 = 0; k0 < p.K; k0 += kTileK) {
        for (int e = tid; e < kTileM * kTileK; e += kMatmulThreads) {
          const int m = a_along_k ? e / kTileK : e % kTileM;
          const int k = a_along_k ? e % kTileK : e / kTileM;
          const int64_t gm = m0 + m, gk = k0 + k;
          a_tile[k][m] = gm < p.M && gk < p.K ? a[gm * p.a_rs + gk * p.a_cs] : T(0);
        }
        for (int e = tid; e < kTileK * kTileN; e += kMatmulThreads) {
          const int n = b_along_n ? e % kTileN : e / kTileK;
          const int k = b_along_n ? e / kTileN : e % kTileK;
          const int64_t gk = k0 + k, gn = n0 + n;
          b_tile[k][n] = gk < p.K && gn < p.N ? b[gk * p.b_rs + gn * p.b_cs] : T(0);
        }
        __syncthreads();
        // acc[i][j] += Σ_k A[m0 + ty + 16i, k0 + k] · B[k0 + k, n0 + tx + 16j]
        for (int k = 0; k < kTileK; ++k) {
          T av[kThreadTile], bv[kThreadTile];
          for (int i = 0; i < kThreadTile; ++i) av[i] = a_tile[k][ty + i * kThreadsY];
          for (int j = 0; j < kThreadTile; ++j) bv[j] = b_tile[k][tx + j * kThreadsX];
          for (int i = 0; i < kThreadTile; ++i)
            for (int j = 0; j < kThreadTile; ++j) acc[i][j] += av[i] * bv[j];
        }
        __syncthreads();  // the tiles are overwritten by the next step
      }

      for (int i = 0; i < kThreadTile; ++i) {
        const int64_t m = m0 + ty + i * kThreadsY;
        if (m >= p.M) continue;
        for (int j = 0; j < kThreadTile; ++j) {
          const int64_t n = n0 + tx + j * kThreadsX;
          if (n >= p.N) continue;
          T& c = out[m * p.o_rs + n * p.o_cs];
          c = p.accumulate ? c + acc[i][j] : acc[i][j];  // beta 0 never reads C (NaN-safe)
        }
      }
    }
  }
}

template <class T>
void launch_simt(const SimtArgs<T>& args) {
  const int64_t tiles_n = (args.N + kTileN - 1) / kTileN, tiles_m = (args.M + kTileM - 1) / kTileM;
  TG_CHECK(tiles_n <= INT_MAX, "matmul: N = {} is too large", args.N);
  const dim3 grid(static_cast<unsigned>(tiles_n), static_cast<unsigned>(std::min(tiles_m, kMaxGridYZ)),
                  static_cast<unsigned>(std::min(args.batch_count, kMaxGridYZ)));
  launch(simt_matmul_kernel<T>, grid, dim3(kMatmulThreads), 0, args);
}

// A matrix operand: its first element, row and column strides, and the strides of the batch dims.
template <class T>
struct Operand {
  T* data;
  int64_t rs, cs;
  Shape batch_strides;
};

template <class T>
Operand<T> operand_of(const TensorView& v) {
  const int nd = v.ndim();
  return {static_cast<T*>(v.data), v.strides[nd - 2], v.strides[nd - 1],
          Shape(v.strides.begin(), v.strides.end() - 2)};
}

// Batch dims merged where every operand's strides allow (out, a, b), size-1 dims dropped.
template <class O, class T>
Indexer<3> batch_indexer(const Shape& batch, const Operand<O>& out, const Operand<const T>& a,
                         const Operand<const T>& b) {
  TensorView vo, va, vb;
  vo.shape = va.shape = vb.shape = batch;
  vo.strides = out.batch_strides;
  va.strides = a.batch_strides;
  vb.strides = b.batch_strides;
  const TensorView* const views[3] = {&vo, &va, &vb};
  return make_indexer<3>(batch, views);
}

// True when two batches write the same output matrix (an output batch stride of 0): they must run
// one after another, as on the CPU.
inline bool output_shared(const Indexer<3>& ix) {
  for (int d = 0; d < ix.ndim; ++d)
    if (ix.strides[0][d] == 0) return true;  // merged dims all have size > 1
  return false;
}

template <class T>
void simt_matmul(const Operand<T>& out, const Operand<const T>& a, const Operand<const T>& b, const Shape& batch,
                 int64_t M, int64_t N, int64_t K, bool accumulate) {
  SimtArgs<T> args{out.data, a.data, b.data, M,  N,    K,    a.rs, a.cs, b.rs, b.cs, out.rs, out.cs,
                   Indexer<3>{}, 1, accumulate};
  const Indexer<3> ix = batch_indexer(batch, out, a, b);
  const int64_t n_batch = batch.numel();
  if (!output_shared(ix)) {
    args.batch = ix;
    args.batch_count = n_batch;
    launch_simt(args);
    return;
  }
  for (int64_t i = 0; i < n_batch; ++i) {  // one launch per batch, ordered on the stream
    int64_t off[3];
    ix.offsets(i, off);
    args.out = out.data + off[0];
    args.a = a.data + off[1];
    args.b = b.data + off[2];
    launch_simt(args);
  }
}

#if !defined(TAPEGRAD_CUDA_EMULATED)
// ---------------------------------------------------------------- cuBLAS

const char* cublas_status_name(cublasStatus_t s) { return cublasGetStatusString(s); }

void check_cublas(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) throw Error(fmt::format("cuda: {}: {}", call, cublas_status_name(s)));
}

// One handle for the process, bound to the backend's stream, created on first use; destroyed only
// by release_cublas_handle() (tensors in static storage may outlive any other owner).
// Its workspace is a fixed buffer the handle keeps (cublasSetWorkspace; 32 MiB, what cuBLAS asks for on
// Hopper), from cudaMalloc, outside the caching allocator: so cuBLAS never allocates while a CUDA graph
// is captured, and a captured GEMM's workspace belongs to no graph's pool.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;
std::mutex g_handle_mutex;
cublasHandle_t g_handle = nullptr;
void* g_workspace = nullptr;
cublasMath_t g_math_mode = CUBLAS_DEFAULT_MATH;  // the mode last set on g_handle

cublasHandle_t cublas_handle() {
  std::lock_guard<std::mutex> lock(g_handle_mutex);
  if (g_handle == nullptr) {
    cublasHandle_t h = nullptr;
    check_cublas(cublasCreate(&h), "cublasCreate");
    check_cublas(cublasSetStream(h, stream()), "cublasSetStream");
    check_cublas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    if (g_workspace == nullptr) check(cudaMalloc(&g_workspace, kCublasWorkspaceBytes), "cuBLAS workspace: cudaMalloc");
    check_cublas(cublasSetWorkspace(h, g_workspace, kCublasWorkspaceBytes), "cublasSetWorkspace");
    g_handle = h, g_math_mode = CUBLAS_DEFAULT_MATH;
  }
  return g_handle;
}

// Sets the handle's math mode when it differs from the one last set.
void set_math_mode(cublasHandle_t h, cublasMath_t mode) {
  if (mode == g_math_mode) return;
  check_cublas(cublasSetMathMode(h, mode), "cublasSetMathMode");
  g_math_mode = mode;
}

cublasStatus_t gemm_strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                    int k, const float* alpha, const float* A, int lda, long long stride_a,
                                    const float* B, int ldb, long long stride_b, const float* beta, float* C,
                                    int ldc, long long stride_c, int count) {
  return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc,
                                   stride_c, count);
}
cublasStatus_t gemm_strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                    int k, const double* alpha, const double* A, int lda, long long stride_a,
                                    const double* B, int ldb, long long stride_b, const double* beta, double* C,
                                    int ldc, long long stride_c, int count) {
  return cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc,
                                   stride_c, count);
}
// bfloat16 in; bfloat16 out, or float32 out (a gradient gathered in float32: beta = 1 adds into it); float32
// accumulation and scalars (tensor cores).
template <class O>
cublasStatus_t gemm_strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                    int k, const float* alpha, const bfloat16* A, int lda, long long stride_a,
                                    const bfloat16* B, int ldb, long long stride_b, const float* beta, O* C,
                                    int ldc, long long stride_c, int count) {
  static_assert(std::is_same_v<O, bfloat16> || std::is_same_v<O, float>, "bf16 GEMM: bf16 or float32 output");
  constexpr cudaDataType_t c_type = std::is_same_v<O, float> ? CUDA_R_32F : CUDA_R_16BF;
  return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, CUDA_R_16BF, lda, stride_a, B, CUDA_R_16BF, ldb,
                                    stride_b, beta, C, c_type, ldc, stride_c, count, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
}
template <class T, class O = T>
constexpr const char* gemm_name() {
  if constexpr (std::is_same_v<T, bfloat16> && std::is_same_v<O, float>)
    return "cublasGemmStridedBatchedEx (bf16 -> float32)";
  if constexpr (std::is_same_v<T, bfloat16>) return "cublasGemmStridedBatchedEx (bf16)";
  else return sizeof(T) == 4 ? "cublasSgemmStridedBatched" : "cublasDgemmStridedBatched";
}
// alpha and beta: float for bfloat16 (the compute type), else T.
template <class T>
using GemmScalar = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;

// How a rows×cols matrix with strides (rs, cs) goes to BLAS without a copy:
//   row-major    [ld, 1] (ld ≥ cols)  or  column-major [1, ld] (ld ≥ rows); else it is packed.
struct BlasLayout {
  bool direct = false;
  bool column_major = false;
  int64_t ld = 1;
};
BlasLayout blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= std::max<int64_t>(cols, 1)))
    return {true, false, rows <= 1 ? std::max<int64_t>(cols, 1) : rs};
  if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= std::max<int64_t>(rows, 1)))
    return {true, true, cols <= 1 ? std::max<int64_t>(rows, 1) : cs};
  return {};
}

// dst[i] = src[i] for every element i of one shape (each operand with its own strides).
template <class T>
__global__ void strided_copy_kernel(T* dst, const T* src, Indexer<2> ix, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[2];
    ix.offsets(i, off);
    dst[off[0]] = src[off[1]];
  }
}

// Copies [batch..., rows, cols] between two stride sets (batch strides of a broadcast operand may be 0).
template <class T>
void copy_matrices(T* dst, const Shape& dst_strides, const T* src, const Shape& src_strides, const Shape& shape) {
  TensorView vd, vs;
  vd.shape = vs.shape = shape;
  vd.strides = dst_strides;
  vs.strides = src_strides;
  const TensorView* const views[2] = {&vd, &vs};
  const int64_t n = shape.numel();
  constexpr int kThreads = 256;
  launch(strided_copy_kernel<T>, dim3(blocks_for(n, kThreads)), dim3(kThreads), 0, dst, src,
         make_indexer<2>(shape, views), n);
}

Shape with_matrix(const Shape& batch, int64_t rs, int64_t cs) {
  Shape s = batch;
  s.push_back(rs);
  s.push_back(cs);
  return s;
}

// An operand packed into a contiguous [batch..., rows, cols] buffer.
template <class T>
Operand<const T> pack(ScratchBuffer& buf, const Operand<const T>& in, const Shape& batch, int64_t rows, int64_t cols) {
  const Shape shape = with_matrix(batch, rows, cols), dense = contiguous_strides(shape);
  T* dst = buf.as<T>();
  copy_matrices<T>(dst, dense, in.data, with_matrix(in.batch_strides, in.rs, in.cs), shape);
  return {dst, cols, 1, Shape(dense.begin(), dense.end() - 2)};
}

inline bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

// The cuBLAS path; returns false (nothing done) when the problem does not fit cuBLAS's int sizes.
// O: the output's element type — T, or float for bfloat16 operands (gemm_strided_batched's overloads).
template <class T, class O = T>
bool cublas_matmul(CudaBackend& backend, Operand<O> out, Operand<const T> a, Operand<const T> b, const Shape& batch,
                   int64_t M, int64_t N, int64_t K, bool accumulate) {
  if (!fits_int(M) || !fits_int(N) || !fits_int(K)) return false;
  BlasLayout la = blas_layout(M, K, a.rs, a.cs), lb = blas_layout(K, N, b.rs, b.cs);
  BlasLayout lo = blas_layout(M, N, out.rs, out.cs);
  for (int64_t ld : {la.ld, lb.ld, lo.ld})
    if (!fits_int(ld)) return false;

  const int64_t n_batch = batch.numel();
  const size_t es = sizeof(T);
  const size_t a_bytes = la.direct ? 0 : static_cast<size_t>(n_batch * M * K) * es;
  const size_t b_bytes = lb.direct ? 0 : static_cast<size_t>(n_batch * K * N) * es;
  const size_t c_bytes = lo.direct ? 0 : static_cast<size_t>(n_batch * M * N) * sizeof(O);
  ScratchBuffer a_buf(backend, a_bytes), b_buf(backend, b_bytes), c_buf(backend, c_bytes);
  if (!la.direct) {
    a = pack<T>(a_buf, a, batch, M, K);
    la = {true, false, K};
  }
  if (!lb.direct) {
    b = pack<T>(b_buf, b, batch, K, N);
    lb = {true, false, N};
  }
  const Operand<O> final_out = out;
  if (!lo.direct) {  // compute into a dense [batch..., M, N] buffer, unpack after
    const Shape dense = contiguous_strides(with_matrix(batch, M, N));
    O* c = c_buf.as<O>();
    if (accumulate)
      copy_matrices<O>(c, dense, out.data, with_matrix(out.batch_strides, out.rs, out.cs), with_matrix(batch, M, N));
    out = {c, N, 1, Shape(dense.begin(), dense.end() - 2)};
    lo = {true, false, N};
  }

  cublasHandle_t h = cublas_handle();
  set_math_mode(h, std::is_same_v<T, float> && g_allow_tf32.load() ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                   : CUBLAS_DEFAULT_MATH);
  const GemmScalar<T> alpha(1), beta(accumulate ? 1 : 0);

  // Row-major output [ld, 1]: column-major Cᵀ (N×M) = Bᵀ·Aᵀ, where a row-major operand read
  // column-major is already its transpose (no flag) and a column-major one needs the flag.
  // Column-major output [1, ld]: C (M×N) = A·B directly, flags the other way round.
  const bool out_cm = lo.column_major;
  const cublasOperation_t op_a = la.column_major != out_cm ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = lb.column_major != out_cm ? CUBLAS_OP_T : CUBLAS_OP_N;

  const Indexer<3> ix = batch_indexer(batch, out, a, b);
  // The innermost merged batch dim is one strided-batched call; the outer ones a host loop.
  Indexer<3> outer = ix;
  int64_t count = 1, stride_c = 0, stride_a = 0, stride_b = 0;
  if (ix.ndim > 0) {
    const int in = ix.ndim - 1;
    count = ix.shape[in];
    stride_c = ix.strides[0][in];
    stride_a = ix.strides[1][in];
    stride_b = ix.strides[2][in];
    outer.ndim = in;
  }
  const int64_t n_outer = n_batch / count;
  for (int64_t o = 0; o < n_outer; ++o) {
    int64_t off[3];
    outer.offsets(o, off);
    for (int64_t first = 0; first < count; first += INT_MAX) {
      const int chunk = static_cast<int>(std::min<int64_t>(count - first, INT_MAX));
      O* C = out.data + off[0] + first * stride_c;
      const T* A = a.data + off[1] + first * stride_a;
      const T* B = b.data + off[2] + first * stride_b;
      cublasStatus_t s;
      if (!out_cm)
        s = gemm_strided_batched(h, op_b, op_a, int(N), int(M), int(K), &alpha, B, int(lb.ld), stride_b, A,
                                 int(la.ld), stride_a, &beta, C, int(lo.ld), stride_c, chunk);
      else
        s = gemm_strided_batched(h, op_a, op_b, int(M), int(N), int(K), &alpha, A, int(la.ld), stride_a, B,
                                 int(lb.ld), stride_b, &beta, C, int(lo.ld), stride_c, chunk);
      check_cublas(s, gemm_name<T, O>());
    }
  }
  if (final_out.data != out.data)
    copy_matrices<O>(final_out.data, with_matrix(final_out.batch_strides, final_out.rs, final_out.cs), out.data,
                     with_matrix(out.batch_strides, out.rs, out.cs), with_matrix(batch, M, N));
  return true;
}
#endif  // !TAPEGRAD_CUDA_EMULATED

template <class T>
void matmul_typed(CudaBackend& backend, const TensorView& out_v, const TensorView& a_v, const TensorView& b_v,
                  bool accumulate) {
  const int nd = out_v.ndim();
  const int64_t M = out_v.shape[nd - 2], N = out_v.shape[nd - 1], K = a_v.shape[nd - 1];
  TG_CHECK(a_v.shape[nd - 2] == M && b_v.shape[nd - 2] == K && b_v.shape[nd - 1] == N,
           "matmul: shapes {} @ {} do not give {}", a_v.shape, b_v.shape, out_v.shape);
  const Shape batch(out_v.shape.begin(), out_v.shape.end() - 2);
  const int64_t n_batch = batch.numel();
  if (M == 0 || N == 0 || n_batch == 0) return;
  if (K == 0 && accumulate) return;  // out += 0

  const Operand<T> out = operand_of<T>(out_v);
  const Operand<const T> a = operand_of<const T>(a_v), b = operand_of<const T>(b_v);
#if !defined(TAPEGRAD_CUDA_EMULATED)
  // cuBLAS unless the SIMT kernel is asked for, K is 0 (the kernel writes the zeros) or batches
  // share one output matrix (they must run one after another; the SIMT path launches them so).
  if (matmul_impl() == MatmulImpl::Cublas && K > 0 && !output_shared(batch_indexer(batch, out, a, b)) &&
      cublas_matmul<T>(backend, out, a, b, batch, M, N, K, accumulate))
    return;
#else
  (void)backend;
#endif
  simt_matmul<T>(out, a, b, batch, M, N, K, accumulate);
}

}  // namespace

void release_cublas_handle() {
#if !defined(TAPEGRAD_CUDA_EMULATED)
  std::lock_guard<std::mutex> lock(g_handle_mutex);
  if (g_handle == nullptr) return;
  check_cublas(cublasDestroy(g_handle), "cublasDestroy");
  g_handle = nullptr;
  check(cudaFree(g_workspace), "cuBLAS workspace: cudaFree");
  g_workspace = nullptr;
#endif
}

void ensure_cublas_handle() {
#if !defined(TAPEGRAD_CUDA_EMULATED)
  (void)cublas_handle();
#endif
}

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }

void set_matmul_impl(MatmulImpl impl) {
#if defined(TAPEGRAD_CUDA_EMULATED)
  TG_CHECK(impl == MatmulImpl::Simt, "set_matmul_impl: the emulated CUDA build has no cuBLAS (only the SIMT kernel)");
#endif
  impl_setting().store(static_cast<int>(impl));
}

MatmulImpl matmul_impl() {
#if defined(TAPEGRAD_CUDA_EMULATED)
  return MatmulImpl::Simt;
#else
  return static_cast<MatmulImpl>(impl_setting().load());
#endif
}

bool CudaBackend::matmul_bf16_native(const TensorView& out_v, const TensorView& a_v, const TensorView& b_v,
                                     bool accumulate) {
#if defined(TAPEGRAD_CUDA_EMULATED)
  (void)out_v, (void)a_v, (void)b_v, (void)accumulate;
  return false;
#else
  const int nd = out_v.ndim();
  if (matmul_impl() != MatmulImpl::Cublas || nd < 2 || a_v.ndim() != nd || b_v.ndim() != nd) return false;
  if (a_v.dtype != DType::BFloat16 || b_v.dtype != DType::BFloat16 ||
      (out_v.dtype != DType::BFloat16 && out_v.dtype != DType::Float32))
    return false;
  const int64_t M = out_v.shape[nd - 2], N = out_v.shape[nd - 1], K = a_v.shape[nd - 1];
  TG_CHECK(a_v.shape[nd - 2] == M && b_v.shape[nd - 2] == K && b_v.shape[nd - 1] == N,
           "matmul: shapes {} @ {} do not give {}", a_v.shape, b_v.shape, out_v.shape);
  const Shape batch(out_v.shape.begin(), out_v.shape.end() - 2);
  if (M == 0 || N == 0 || batch.numel() == 0) return true;
  if (K == 0) return false;  // the bridge's float32 path writes the zeros
  const Operand<const bfloat16> a = operand_of<const bfloat16>(a_v), b = operand_of<const bfloat16>(b_v);
  if (out_v.dtype == DType::Float32) {  // a gradient gathered in float32 (autograd/ops/matmul.cpp)
    const Operand<float> out = operand_of<float>(out_v);
    if (output_shared(batch_indexer(batch, out, a, b))) return false;
    return cublas_matmul<bfloat16, float>(*this, out, a, b, batch, M, N, K, accumulate);
  }
  const Operand<bfloat16> out = operand_of<bfloat16>(out_v);
  if (output_shared(batch_indexer(batch, out, a, b))) return false;
  return cublas_matmul<bfloat16>(*this, out, a, b, batch, M, N, K, accumulate);
#endif
}

void CudaBackend::matmul(const TensorView& out, const TensorView& a, const TensorView& b, bool accumulate) {
  TG_CHECK(out.ndim() >= 2 && a.ndim() == out.ndim() && b.ndim() == out.ndim(),
           "matmul: expected operands of one rank >= 2, got {} @ {} -> {}", a.shape, b.shape, out.shape);
  TG_CHECK(a.dtype == out.dtype && b.dtype == out.dtype, "matmul: dtypes differ: {} @ {} -> {}", a.dtype, b.dtype,
           out.dtype);
  switch (out.dtype) {
    case DType::Float32: return matmul_typed<float>(*this, out, a, b, accumulate);
    case DType::Float64: return matmul_typed<double>(*this, out, a, b, accumulate);
    default: throw Error(fmt::format("matmul: dtype {} is not supported (float32 or float64 expected)", out.dtype));
  }
}

}  // namespace tapegrad::kernels::cuda
