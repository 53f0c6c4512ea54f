// fused_attention.cu — causal attention on the GPU, forward and backward, FlashAttention-2 style:
// SIMT kernels (float32 and float64, no tensor cores) that never build the [T, T] matrices.
//
// One head: q [T, D], k and v [T, D], scale s. Query row t sees keys j ≤ t (the forward also takes
// k, v [Tk, D] with Tk > T, a KV cache: query t is then position t + off, off = Tk − T, and sees
// keys j ≤ t + off; the backward takes Tk = T only):
//   S_tj = s·q_t·k_j,   lse_t = log Σ_{j≤t} exp(S_tj),   P_tj = exp(S_tj − lse_t),   o_t = Σ_j P_tj v_j
// Backward (g = dL/do):  Δ_t = g_t·o_t,  dP_tj = g_t·v_j,  dS_tj = P_tj (dP_tj − Δ_t)
//   dq_t = s Σ_j dS_tj k_j,   dk_j = s Σ_t dS_tj q_t,   dv_j = Σ_t P_tj g_t
// Grouped-query attention: query head h reads kv head h / G (G = H / Hkv).
//
// Kernels (blocks of 4 warps; every view has D stride 1, other strides are arbitrary):
//   forward_kernel     grid (B·H, query tiles of Br = 4·R rows), heaviest (last) tiles first. A warp owns R
//                      query rows; Q tile in shared memory, K/V tiles of Bc = 32·KPL keys staged in turn
//                      up to the causal limit. Lane ℓ scores keys ℓ, ℓ+32, … (an R × KPL register tile),
//                      online softmax per row (running max m by warp_max, a per-lane partial sum l),
//                      then o[r][d] += Σ_j P_rj V_jd with lanes over d (DPL = ⌈D/32⌉ columns per lane).
//                      Writes o / l and lse = m + log l.
//   delta_kernel       one warp per row: Δ = Σ_d dO·O into a temporary [B, H, T] buffer.
//   key_grad_kernel    grid (B·Hkv, key tiles of Bk = 4·RK keys). A warp owns RK keys, lanes own queries;
//                      loops over the G query heads of the group and every query tile at or after the key
//                      tile, recomputing P = exp(S − lse) and dS, and accumulates dV += Pᵀ·dO and
//                      dK += dSᵀ·Q in registers (lanes over d); written once: deterministic, no atomics.
//   query_grad_kernel  grid (B·H, query tiles), the forward's layout: recomputes P and dS for the warp's
//                      rows and accumulates dQ += dS·K in registers; dQ = s·that.
// Shared-memory operands read by all lanes of a warp at once (a broadcast: the warp's own rows) have
// a row stride rounded up to 4 and are read 4 at a time; operands whose rows are spread over lanes
// have an odd row stride (no bank conflicts). D > 128 (more than 4 columns per lane), or tiles that
// do not fit the device's shared memory, run simple fallback kernels (*_rowwise_kernel): one warp per
// row, the accumulators in the output rows themselves.
// Tiles: float32 R = 8 rows per warp, KPL = 2 keys per lane (Br = 32, Bc = 64), dK/dV 8 keys per warp
// and 2 queries per lane; float64 half of each (Tiles<T>). Float32 is accumulated in float, as the CPU
// backend (BLAS sgemm) does. The backward recomputes every score with the forward's operation order,
// so P = exp(S − lse) is consistent with the lse the forward wrote.
#include <cmath>
#include <initializer_list>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/runtime.h"

// Unrolls a loop of constant trip count under nvcc (g++ of the emulated build has no such pragma).
#if defined(TAPEGRAD_CUDA_EMULATED)
#define ATTENTION_UNROLL
#else
#define ATTENTION_UNROLL _Pragma("unroll")
#endif

namespace tapegrad::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

// Tile shapes per dtype: rows per warp (forward / dQ), keys per lane, keys per warp (dK/dV), queries per lane.
template <class T>
struct Tiles;
template <>
struct Tiles<float> {
  static constexpr int kRowsPerWarp = 8, kKeysPerLane = 2, kKeyRowsPerWarp = 8, kQueriesPerLane = 2;
};
template <>
struct Tiles<double> {
  static constexpr int kRowsPerWarp = 4, kKeysPerLane = 1, kKeyRowsPerWarp = 4, kQueriesPerLane = 1;
};

// One [B, heads, T, D] tensor (or [B, heads, T] for lse): the pointer to element 0 and the strides of b, h, t.
template <class P>
struct Heads {
  P* base;
  int64_t sb, sh, st;
  __host__ __device__ P* at(int b, int h) const { return base + b * sb + h * sh; }
};
template <class P>
Heads<P> heads_of(const TensorView& v) {
  return {static_cast<P*>(v.data), v.strides[0], v.strides[1], v.strides[2]};
}

__device__ inline float exp_of(float x) { return expf(x); }
__device__ inline double exp_of(double x) { return exp(x); }
__device__ inline float log_of(float x) { return logf(x); }
__device__ inline double log_of(double x) { return log(x); }
template <class T>
__device__ inline T negative_infinity() {
  return static_cast<T>(-INFINITY);
}

__host__ __device__ inline int min_of(int a, int b) { return a < b ? a : b; }
__host__ __device__ inline int round_up4(int n) { return (n + 3) / 4 * 4; }
__host__ __device__ inline int odd_stride(int n) { return n | 1; }

// v[0..3] = p[0..3]; p 16-byte aligned.
__device__ inline void load4(const float* p, float (&v)[4]) {
#if defined(TAPEGRAD_CUDA_EMULATED)
  for (int e = 0; e < 4; ++e) v[e] = p[e];
#else
  const float4 f = *reinterpret_cast<const float4*>(p);
  v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
#endif
}
__device__ inline void load4(const double* p, double (&v)[4]) {
#if defined(TAPEGRAD_CUDA_EMULATED)
  for (int e = 0; e < 4; ++e) v[e] = p[e];
#else
  const double2 a = *reinterpret_cast<const double2*>(p), b = *reinterpret_cast<const double2*>(p + 2);
  v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
#endif
}

// Copies rows [row0, row0 + rows) of one head (row stride ld, D contiguous) to shared dst (row
// stride dst_ld); rows ≥ T are zeros. Warps over rows, lanes over d (coalesced).
template <class T>
__device__ inline void load_rows(T* dst, int dst_ld, const T* src, int64_t ld, int row0, int rows, int T_len, int D) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int r = warp; r < rows; r += kWarps) {
    const int t = row0 + r;
    for (int d = lane; d < D; d += 32) dst[r * dst_ld + d] = t < T_len ? src[t * ld + d] : T(0);
  }
}

// acc[r][c] += Σ_d A[r][d]·Bm[lane + 32c][d]: A holds this warp's R rows (row stride lda, a multiple
// of 4; every lane reads the same element: a broadcast), Bm one row per lane (odd stride ldb).
template <class T, int R, int C>
__device__ inline void dot_rows_with_lane_rows(T (&acc)[R][C], const T* A, int lda, const T* Bm, int ldb, int D) {
  const int lane = threadIdx.x % 32;
  int d = 0;
  for (; d + 4 <= D; d += 4) {
    T b[C][4];
ATTENTION_UNROLL
    for (int c = 0; c < C; ++c)
ATTENTION_UNROLL
      for (int e = 0; e < 4; ++e) b[c][e] = Bm[(lane + 32 * c) * ldb + d + e];
ATTENTION_UNROLL
    for (int r = 0; r < R; ++r) {
      T a[4];
      load4(A + r * lda + d, a);
ATTENTION_UNROLL
      for (int c = 0; c < C; ++c)
ATTENTION_UNROLL
        for (int e = 0; e < 4; ++e) acc[r][c] += a[e] * b[c][e];
    }
  }
  for (; d < D; ++d) {
ATTENTION_UNROLL
    for (int r = 0; r < R; ++r) {
      const T a = A[r * lda + d];
ATTENTION_UNROLL
      for (int c = 0; c < C; ++c) acc[r][c] += a * Bm[(lane + 32 * c) * ldb + d];
    }
  }
}

// acc[r][i] += Σ_{j<n} W[r][j]·M[j][lane + 32i]: W holds this warp's R rows of weights (row stride ldw,
// a multiple of 4; broadcast reads), M is [n, D] (row stride ldm), its columns spread over the lanes.
template <class T, int R, int DPL>
__device__ inline void accumulate_weighted_rows(T (&acc)[R][DPL], const T* W, int ldw, const T* M, int ldm, int n,
                                                int D) {
  const int lane = threadIdx.x % 32;
  bool has[DPL];
ATTENTION_UNROLL
  for (int i = 0; i < DPL; ++i) has[i] = lane + 32 * i < D;
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    T m[4][DPL];
ATTENTION_UNROLL
    for (int e = 0; e < 4; ++e)
ATTENTION_UNROLL
      for (int i = 0; i < DPL; ++i) m[e][i] = has[i] ? M[(j + e) * ldm + lane + 32 * i] : T(0);
ATTENTION_UNROLL
    for (int r = 0; r < R; ++r) {
      T w[4];
      load4(W + r * ldw + j, w);
ATTENTION_UNROLL
      for (int e = 0; e < 4; ++e)
ATTENTION_UNROLL
        for (int i = 0; i < DPL; ++i) acc[r][i] += w[e] * m[e][i];
    }
  }
  for (; j < n; ++j) {
    T m[DPL];
ATTENTION_UNROLL
    for (int i = 0; i < DPL; ++i) m[i] = has[i] ? M[j * ldm + lane + 32 * i] : T(0);
ATTENTION_UNROLL
    for (int r = 0; r < R; ++r) {
      const T w = W[r * ldw + j];
ATTENTION_UNROLL
      for (int i = 0; i < DPL; ++i) acc[r][i] += w * m[i];
    }
  }
}

template <class T, int R, int C>
__device__ inline void zero(T (&a)[R][C]) {
ATTENTION_UNROLL
  for (int r = 0; r < R; ++r)
ATTENTION_UNROLL
    for (int c = 0; c < C; ++c) a[r][c] = T(0);
}

// The sizes every kernel needs.
struct Dims {
  int T, D, H, Hkv, G;
  int Tk, off;  // keys per head and Tk − T (0 but in the forward over a KV cache)
};

// ---- forward ----

template <class T, int R, int KPL>
size_t forward_shared_bytes(int D) {
  const int Br = kWarps * R, Bc = 32 * KPL;
  return sizeof(T) * (size_t(Br) * round_up4(D) + size_t(Bc) * odd_stride(D) + size_t(Bc) * round_up4(D) +
                      size_t(Br) * Bc);
}

// out [B, H, T, D], lse [B, H, T]; see the header for the mapping.
template <class T, int R, int KPL, int DPL>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(Heads<T> out, Heads<T> lse, Heads<const T> q, Heads<const T> k, Heads<const T> v, Dims n,
                   T scale) {
  constexpr int Br = kWarps * R, Bc = 32 * KPL;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int Dq = round_up4(n.D), Dp = odd_stride(n.D);
  TG_DYNAMIC_SHARED(T, smem);
  T* Qs = smem;           // [Br, Dq]  query rows (broadcast reads)
  T* Ks = Qs + Br * Dq;   // [Bc, Dp]  key rows, one per lane
  T* Vs = Ks + Bc * Dp;   // [Bc, Dq]  value rows, columns over lanes
  T* Ps = Vs + Bc * Dq;   // [Br, Bc]  probabilities of the tile (unnormalised)

  const int b = blockIdx.x / n.H, h = blockIdx.x % n.H, kv = h / n.G;
  const int row0 = (gridDim.y - 1 - blockIdx.y) * Br;  // the longest rows first
  const int key_end = min_of(n.Tk, row0 + Br + n.off);    // keys ≤ the block's last row
  const T* kh = k.at(b, kv);
  const T* vh = v.at(b, kv);
  load_rows(Qs, Dq, q.at(b, h), q.st, row0, Br, n.T, n.D);

  T m[R], l[R], o[R][DPL];  // running max, this lane's part of the running sum, output accumulators
ATTENTION_UNROLL
  for (int r = 0; r < R; ++r) m[r] = negative_infinity<T>(), l[r] = T(0);
  zero(o);

  for (int k0 = 0; k0 < key_end; k0 += Bc) {
    __syncthreads();  // the previous tile's readers are done (and Qs is complete)
    load_rows(Ks, Dp, kh, k.st, k0, Bc, n.Tk, n.D);
    load_rows(Vs, Dq, vh, v.st, k0, Bc, n.Tk, n.D);
    __syncthreads();
    // S[r][c] = q_t·k_j for t = row0 + warp·R + r, j = k0 + lane + 32c
    T s[R][KPL];
    zero(s);
    dot_rows_with_lane_rows(s, Qs + warp * R * Dq, Dq, Ks, Dp, n.D);
ATTENTION_UNROLL
    for (int r = 0; r < R; ++r) {
      const int t = row0 + warp * R + r;
      T tile_max = negative_infinity<T>();
ATTENTION_UNROLL
      for (int c = 0; c < KPL; ++c) {
        const int j = k0 + lane + 32 * c;
        s[r][c] = j <= t + n.off && t < n.T ? scale * s[r][c] : negative_infinity<T>();
        tile_max = s[r][c] > tile_max ? s[r][c] : tile_max;
      }
      tile_max = warp_max(tile_max);
      // m' = max(m, max_j S_tj); the sum and the output so far are rescaled by exp(m − m')
      const T m_new = m[r] > tile_max ? m[r] : tile_max;
      const T m_ref = m_new == negative_infinity<T>() ? T(0) : m_new;  // rows past T see no key
      const T rescale = exp_of(m[r] - m_ref);
      m[r] = m_new;
      T p_sum = T(0);
ATTENTION_UNROLL
      for (int c = 0; c < KPL; ++c) {
        const T p = exp_of(s[r][c] - m_ref);
        Ps[(warp * R + r) * Bc + lane + 32 * c] = p;
        p_sum += p;
      }
      l[r] = l[r] * rescale + p_sum;
ATTENTION_UNROLL
      for (int i = 0; i < DPL; ++i) o[r][i] *= rescale;
    }
    __syncthreads();
    // o[r][d] += Σ_j P[r][j]·V[j][d]
    accumulate_weighted_rows(o, Ps + warp * R * Bc, Bc, Vs, Dq, min_of(Bc, key_end - k0), n.D);
  }

  T* oh = out.at(b, h);
  T* lh = lse.at(b, h);
ATTENTION_UNROLL
  for (int r = 0; r < R; ++r) {
    const T sum = warp_sum(l[r]);
    const int t = row0 + warp * R + r;
    if (t < n.T) {
      const T inv = T(1) / sum;
ATTENTION_UNROLL
      for (int i = 0; i < DPL; ++i)
        if (lane + 32 * i < n.D) oh[t * out.st + lane + 32 * i] = o[r][i] * inv;
      if (lane == 0) lh[t * lse.st] = m[r] + log_of(sum);
    }
  }
}

// ---- backward ----

// delta[(b·H + h)·T + t] = Σ_d dO[b, h, t, d]·O[b, h, t, d]; one warp per row.
template <class T>
__global__ void __launch_bounds__(kThreads)
    delta_kernel(T* delta, Heads<const T> grad_out, Heads<const T> out, int B, Dims n) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t rows = int64_t(B) * n.H * n.T;
  // every warp of the block runs the same number of iterations (warp_sum is block-wide in emulation)
  for (int64_t first = int64_t(blockIdx.x) * kWarps; first < rows; first += int64_t(gridDim.x) * kWarps) {
    const int64_t row = first + warp;
    T dot = T(0);
    if (row < rows) {
      const int t = int(row % n.T);
      const int64_t bh = row / n.T;
      const int b = int(bh / n.H), h = int(bh % n.H);
      const T* g = grad_out.at(b, h) + t * grad_out.st;
      const T* o = out.at(b, h) + t * out.st;
      for (int d = lane; d < n.D; d += 32) dot += g[d] * o[d];
    }
    dot = warp_sum(dot);
    if (row < rows && lane == 0) delta[row] = dot;
  }
}

template <class T, int RK, int QPL>
size_t key_grad_shared_bytes(int D) {
  const int Bk = kWarps * RK, Bq = 32 * QPL;
  return sizeof(T) * (2 * size_t(Bk) * round_up4(D) + 2 * size_t(Bq) * odd_stride(D) + 2 * size_t(Bk) * Bq +
                      2 * size_t(Bq));
}

// grad_k, grad_v [B, Hkv, T, D] for one tile of Bk keys of one kv head; see the header.
template <class T, int RK, int QPL, int DPL>
__global__ void __launch_bounds__(kThreads)
    key_grad_kernel(Heads<T> grad_k, Heads<T> grad_v, Heads<const T> grad_out, Heads<const T> q, Heads<const T> k,
                    Heads<const T> v, Heads<const T> lse, const T* delta, Dims n, T scale) {
  constexpr int Bk = kWarps * RK, Bq = 32 * QPL;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int Dq = round_up4(n.D), Dp = odd_stride(n.D);
  TG_DYNAMIC_SHARED(T, smem);
  T* Ks = smem;                // [Bk, Dq]  key rows (broadcast reads)
  T* Vs = Ks + Bk * Dq;        // [Bk, Dq]  value rows
  T* Qs = Vs + Bk * Dq;        // [Bq, Dp]  query rows, one per lane, then columns over lanes
  T* dOs = Qs + Bq * Dp;       // [Bq, Dp]  output-gradient rows
  T* Ps = dOs + Bq * Dp;       // [Bk, Bq]  Pᵀ of the tile
  T* dSs = Ps + Bk * Bq;       // [Bk, Bq]  dSᵀ of the tile
  T* lse_s = dSs + Bk * Bq;    // [Bq]
  T* delta_s = lse_s + Bq;     // [Bq]

  const int b = blockIdx.x / n.Hkv, kv = blockIdx.x % n.Hkv;
  const int key0 = blockIdx.y * Bk;
  load_rows(Ks, Dq, k.at(b, kv), k.st, key0, Bk, n.T, n.D);
  load_rows(Vs, Dq, v.at(b, kv), v.st, key0, Bk, n.T, n.D);

  T dk[RK][DPL], dv[RK][DPL];
  zero(dk);
  zero(dv);
  for (int g = 0; g < n.G; ++g) {
    const int h = kv * n.G + g;
    const T* qh = q.at(b, h);
    const T* gh = grad_out.at(b, h);
    const T* lh = lse.at(b, h);
    const T* delta_h = delta + (int64_t(b) * n.H + h) * n.T;
    for (int q0 = key0 / Bq * Bq; q0 < n.T; q0 += Bq) {  // query tiles that see a key of this tile
      __syncthreads();  // the previous tile's readers are done (and Ks, Vs are complete)
      load_rows(Qs, Dp, qh, q.st, q0, Bq, n.T, n.D);
      load_rows(dOs, Dp, gh, grad_out.st, q0, Bq, n.T, n.D);
      for (int i = threadIdx.x; i < Bq; i += kThreads) {
        const int t = q0 + i;
        lse_s[i] = t < n.T ? lh[t * lse.st] : T(0);
        delta_s[i] = t < n.T ? delta_h[t] : T(0);
      }
      __syncthreads();
      // S[r][c] = k_j·q_t, dP[r][c] = v_j·dO_t for j = key0 + warp·RK + r, t = q0 + lane + 32c
      T s[RK][QPL], dp[RK][QPL];
      zero(s);
      zero(dp);
      dot_rows_with_lane_rows(s, Ks + warp * RK * Dq, Dq, Qs, Dp, n.D);
      dot_rows_with_lane_rows(dp, Vs + warp * RK * Dq, Dq, dOs, Dp, n.D);
ATTENTION_UNROLL
      for (int r = 0; r < RK; ++r) {
        const int j = key0 + warp * RK + r;
ATTENTION_UNROLL
        for (int c = 0; c < QPL; ++c) {
          const int i = lane + 32 * c, t = q0 + i;
          // P = exp(s·q·k − lse), dS = P (dP − Δ); zero above the diagonal and past T
          const T p = j <= t && t < n.T ? exp_of(scale * s[r][c] - lse_s[i]) : T(0);
          Ps[(warp * RK + r) * Bq + i] = p;
          dSs[(warp * RK + r) * Bq + i] = p * (dp[r][c] - delta_s[i]);
        }
      }
      __syncthreads();
      // dV[r][d] += Σ_t P[t][r]·dO[t][d],  dK[r][d] += Σ_t dS[t][r]·Q[t][d]
      const int rows = min_of(Bq, n.T - q0);
      accumulate_weighted_rows(dv, Ps + warp * RK * Bq, Bq, dOs, Dp, rows, n.D);
      accumulate_weighted_rows(dk, dSs + warp * RK * Bq, Bq, Qs, Dp, rows, n.D);
    }
  }

  T* dkh = grad_k.at(b, kv);
  T* dvh = grad_v.at(b, kv);
ATTENTION_UNROLL
  for (int r = 0; r < RK; ++r) {
    const int j = key0 + warp * RK + r;
    if (j >= n.T) continue;
ATTENTION_UNROLL
    for (int i = 0; i < DPL; ++i) {
      const int d = lane + 32 * i;
      if (d >= n.D) continue;
      dkh[j * grad_k.st + d] = scale * dk[r][i];
      dvh[j * grad_v.st + d] = dv[r][i];
    }
  }
}

template <class T, int R, int KPL>
size_t query_grad_shared_bytes(int D) {
  const int Br = kWarps * R, Bc = 32 * KPL;
  return sizeof(T) * (2 * size_t(Br) * round_up4(D) + 2 * size_t(Bc) * odd_stride(D) + size_t(Br) * Bc);
}

// grad_q [B, H, T, D] for one tile of Br query rows; see the header.
template <class T, int R, int KPL, int DPL>
__global__ void __launch_bounds__(kThreads)
    query_grad_kernel(Heads<T> grad_q, Heads<const T> grad_out, Heads<const T> q, Heads<const T> k,
                      Heads<const T> v, Heads<const T> lse, const T* delta, Dims n, T scale) {
  constexpr int Br = kWarps * R, Bc = 32 * KPL;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int Dq = round_up4(n.D), Dp = odd_stride(n.D);
  TG_DYNAMIC_SHARED(T, smem);
  T* Qs = smem;            // [Br, Dq]  query rows (broadcast reads)
  T* dOs = Qs + Br * Dq;   // [Br, Dq]  output-gradient rows
  T* Ks = dOs + Br * Dq;   // [Bc, Dp]  key rows, one per lane, then columns over lanes
  T* Vs = Ks + Bc * Dp;    // [Bc, Dp]  value rows, one per lane
  T* dSs = Vs + Bc * Dp;   // [Br, Bc]  dS of the tile

  const int b = blockIdx.x / n.H, h = blockIdx.x % n.H, kv = h / n.G;
  const int row0 = (gridDim.y - 1 - blockIdx.y) * Br;  // the longest rows first
  const int key_end = min_of(n.T, row0 + Br);
  const T* kh = k.at(b, kv);
  const T* vh = v.at(b, kv);
  load_rows(Qs, Dq, q.at(b, h), q.st, row0, Br, n.T, n.D);
  load_rows(dOs, Dq, grad_out.at(b, h), grad_out.st, row0, Br, n.T, n.D);
  T row_lse[R], row_delta[R];
ATTENTION_UNROLL
  for (int r = 0; r < R; ++r) {
    const int t = row0 + warp * R + r;
    row_lse[r] = t < n.T ? lse.at(b, h)[t * lse.st] : T(0);
    row_delta[r] = t < n.T ? delta[(int64_t(b) * n.H + h) * n.T + t] : T(0);
  }

  T dq[R][DPL];
  zero(dq);
  for (int k0 = 0; k0 < key_end; k0 += Bc) {
    __syncthreads();  // the previous tile's readers are done (and Qs, dOs are complete)
    load_rows(Ks, Dp, kh, k.st, k0, Bc, n.T, n.D);
    load_rows(Vs, Dp, vh, v.st, k0, Bc, n.T, n.D);
    __syncthreads();
    // S[r][c] = q_t·k_j, dP[r][c] = dO_t·v_j for t = row0 + warp·R + r, j = k0 + lane + 32c
    T s[R][KPL], dp[R][KPL];
    zero(s);
    zero(dp);
    dot_rows_with_lane_rows(s, Qs + warp * R * Dq, Dq, Ks, Dp, n.D);
    dot_rows_with_lane_rows(dp, dOs + warp * R * Dq, Dq, Vs, Dp, n.D);
ATTENTION_UNROLL
    for (int r = 0; r < R; ++r) {
      const int t = row0 + warp * R + r;
ATTENTION_UNROLL
      for (int c = 0; c < KPL; ++c) {
        const int j = k0 + lane + 32 * c;
        // dS = P (dP − Δ) with P = exp(s·q·k − lse); zero above the diagonal and past T
        const T p = j <= t && t < n.T ? exp_of(scale * s[r][c] - row_lse[r]) : T(0);
        dSs[(warp * R + r) * Bc + lane + 32 * c] = p * (dp[r][c] - row_delta[r]);
      }
    }
    __syncthreads();
    // dQ[r][d] += Σ_j dS[r][j]·K[j][d]
    accumulate_weighted_rows(dq, dSs + warp * R * Bc, Bc, Ks, Dp, min_of(Bc, key_end - k0), n.D);
  }

  T* dqh = grad_q.at(b, h);
ATTENTION_UNROLL
  for (int r = 0; r < R; ++r) {
    const int t = row0 + warp * R + r;
    if (t >= n.T) continue;
ATTENTION_UNROLL
    for (int i = 0; i < DPL; ++i)
      if (lane + 32 * i < n.D) dqh[t * grad_q.st + lane + 32 * i] = scale * dq[r][i];
  }
}

// ---- fallback for D > 128: one warp per row, its accumulators in the output row itself ----

// Σ_d a[d]·b[d] with four interleaved partial sums (closer to BLAS's rounding than one running sum).
template <class T>
__device__ inline T dot_product(const T* a, const T* b, int D) {
  T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
  int d = 0;
  for (; d + 4 <= D; d += 4) {
    s0 += a[d] * b[d];
    s1 += a[d + 1] * b[d + 1];
    s2 += a[d + 2] * b[d + 2];
    s3 += a[d + 3] * b[d + 3];
  }
  for (; d < D; ++d) s0 += a[d] * b[d];
  return (s0 + s1) + (s2 + s3);
}

// Forward, one query row t per warp: lane ℓ scores key k0 + ℓ, online softmax as above, o_t is
// rescaled and accumulated in out's row (each element by one lane only).
template <class T>
__global__ void __launch_bounds__(kThreads)
    forward_rowwise_kernel(Heads<T> out, Heads<T> lse, Heads<const T> q, Heads<const T> k, Heads<const T> v,
                           Dims n, T scale) {
  __shared__ T p_tile[kWarps][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int b = blockIdx.x / n.H, h = blockIdx.x % n.H, kv = h / n.G;
  const int first_row = (gridDim.y - 1 - blockIdx.y) * kWarps, t = first_row + warp;
  const int key_end = min_of(n.Tk, first_row + kWarps + n.off);
  const bool active = t < n.T;
  const T* qrow = q.at(b, h) + t * q.st;
  const T* kh = k.at(b, kv);
  const T* vh = v.at(b, kv);
  T* orow = out.at(b, h) + t * out.st;
  if (active)
    for (int d = lane; d < n.D; d += 32) orow[d] = T(0);
  T m = negative_infinity<T>(), l = T(0);
  for (int k0 = 0; k0 < key_end; k0 += 32) {
    const int j = k0 + lane;
    T s = negative_infinity<T>();
    if (active && j <= t + n.off) {
      const T* krow = kh + j * k.st;
      s = scale * dot_product(qrow, krow, n.D);
    }
    const T tile_max = warp_max(s);
    const T m_new = m > tile_max ? m : tile_max;
    const T m_ref = m_new == negative_infinity<T>() ? T(0) : m_new;
    const T rescale = exp_of(m - m_ref);
    const T p = exp_of(s - m_ref);
    m = m_new;
    l = l * rescale + p;
    p_tile[warp][lane] = p;
    __syncthreads();
    if (active) {
      const int keys = min_of(32, t + n.off + 1 - k0);
      for (int d = lane; d < n.D; d += 32) {
        T acc = T(0);
        for (int jj = 0; jj < keys; ++jj) acc += p_tile[warp][jj] * vh[(k0 + jj) * v.st + d];
        orow[d] = orow[d] * rescale + acc;
      }
    }
    __syncthreads();
  }
  const T sum = warp_sum(l);
  if (active) {
    const T inv = T(1) / sum;
    for (int d = lane; d < n.D; d += 32) orow[d] *= inv;
    if (lane == 0) lse.at(b, h)[t * lse.st] = m + log_of(sum);
  }
}

// dQ, one query row t per warp: dq_t = s Σ_j dS_tj k_j accumulated in grad_q's row.
template <class T>
__global__ void __launch_bounds__(kThreads)
    query_grad_rowwise_kernel(Heads<T> grad_q, Heads<const T> grad_out, Heads<const T> q, Heads<const T> k,
                              Heads<const T> v, Heads<const T> lse, const T* delta, Dims n, T scale) {
  __shared__ T ds_tile[kWarps][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int b = blockIdx.x / n.H, h = blockIdx.x % n.H, kv = h / n.G;
  const int first_row = (gridDim.y - 1 - blockIdx.y) * kWarps, t = first_row + warp;
  const int key_end = min_of(n.T, first_row + kWarps);
  const bool active = t < n.T;
  const T* qrow = q.at(b, h) + t * q.st;
  const T* grow = grad_out.at(b, h) + t * grad_out.st;
  const T* kh = k.at(b, kv);
  const T* vh = v.at(b, kv);
  T* dqrow = grad_q.at(b, h) + t * grad_q.st;
  const T row_lse = active ? lse.at(b, h)[t * lse.st] : T(0);
  const T row_delta = active ? delta[(int64_t(b) * n.H + h) * n.T + t] : T(0);
  if (active)
    for (int d = lane; d < n.D; d += 32) dqrow[d] = T(0);
  for (int k0 = 0; k0 < key_end; k0 += 32) {
    const int j = k0 + lane;
    T ds = T(0);
    if (active && j <= t) {
      const T* krow = kh + j * k.st;
      const T* vrow = vh + j * v.st;
      const T s = dot_product(qrow, krow, n.D), dp = dot_product(grow, vrow, n.D);
      ds = exp_of(scale * s - row_lse) * (dp - row_delta);
    }
    ds_tile[warp][lane] = ds;
    __syncthreads();
    if (active) {
      const int keys = min_of(32, t + 1 - k0);
      for (int d = lane; d < n.D; d += 32) {
        T acc = T(0);
        for (int jj = 0; jj < keys; ++jj) acc += ds_tile[warp][jj] * kh[(k0 + jj) * k.st + d];
        dqrow[d] += acc;
      }
    }
    __syncthreads();
  }
  if (active)
    for (int d = lane; d < n.D; d += 32) dqrow[d] *= scale;
}

// dK and dV, one key row j per warp: lane ℓ takes query q0 + ℓ of every head of the group.
template <class T>
__global__ void __launch_bounds__(kThreads)
    key_grad_rowwise_kernel(Heads<T> grad_k, Heads<T> grad_v, Heads<const T> grad_out, Heads<const T> q,
                            Heads<const T> k, Heads<const T> v, Heads<const T> lse, const T* delta, Dims n,
                            T scale) {
  __shared__ T p_tile[kWarps][32];
  __shared__ T ds_tile[kWarps][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int b = blockIdx.x / n.Hkv, kv = blockIdx.x % n.Hkv;
  const int first_key = blockIdx.y * kWarps, j = first_key + warp;
  const bool active = j < n.T;
  const T* krow = k.at(b, kv) + j * k.st;
  const T* vrow = v.at(b, kv) + j * v.st;
  T* dkrow = grad_k.at(b, kv) + j * grad_k.st;
  T* dvrow = grad_v.at(b, kv) + j * grad_v.st;
  if (active)
    for (int d = lane; d < n.D; d += 32) dkrow[d] = T(0), dvrow[d] = T(0);
  for (int g = 0; g < n.G; ++g) {
    const int h = kv * n.G + g;
    const T* qh = q.at(b, h);
    const T* gh = grad_out.at(b, h);
    const T* lh = lse.at(b, h);
    const T* delta_h = delta + (int64_t(b) * n.H + h) * n.T;
    for (int q0 = first_key / 32 * 32; q0 < n.T; q0 += 32) {
      const int t = q0 + lane;
      T p = T(0), ds = T(0);
      if (active && j <= t && t < n.T) {
        const T* qrow = qh + t * q.st;
        const T* grow = gh + t * grad_out.st;
        const T s = dot_product(krow, qrow, n.D), dp = dot_product(vrow, grow, n.D);
        p = exp_of(scale * s - lh[t * lse.st]);
        ds = p * (dp - delta_h[t]);
      }
      p_tile[warp][lane] = p;
      ds_tile[warp][lane] = ds;
      __syncthreads();
      if (active) {
        const int queries = min_of(32, n.T - q0);
        for (int d = lane; d < n.D; d += 32) {
          T acc_v = T(0), acc_k = T(0);
          for (int tt = 0; tt < queries; ++tt) {
            acc_v += p_tile[warp][tt] * gh[(q0 + tt) * grad_out.st + d];
            acc_k += ds_tile[warp][tt] * qh[(q0 + tt) * q.st + d];
          }
          dvrow[d] += acc_v;
          dkrow[d] += acc_k;
        }
      }
      __syncthreads();
    }
  }
  if (active)
    for (int d = lane; d < n.D; d += 32) dkrow[d] *= scale;
}

// ---- host side ----

// Lets `kernel` use `bytes` of dynamic shared memory (above the default 48 KiB, opt-in on NVIDIA).
template <class Kernel>
void allow_shared_bytes(Kernel* kernel, size_t bytes) {
#if defined(TAPEGRAD_CUDA_EMULATED)
  (void)kernel, (void)bytes;
#else
  if (bytes <= 48 * 1024) return;
  static std::mutex mu;
  static std::vector<std::pair<const void*, size_t>> granted;  // kernel → bytes already allowed
  std::lock_guard<std::mutex> lock(mu);
  const void* key = reinterpret_cast<const void*>(kernel);
  for (auto& [kern, allowed] : granted)
    if (kern == key) {
      if (bytes <= allowed) return;
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
            "causal_attention: cudaFuncSetAttribute");
      allowed = bytes;
      return;
    }
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
        "causal_attention: cudaFuncSetAttribute");
  granted.emplace_back(key, bytes);
#endif
}

// The host-side checks of both directions: float dtypes, 4-d views of matching shapes, D stride 1.
// longer_keys: k, v may have more positions than q (the forward over a KV cache).
Dims check_attention_views(const char* op, const TensorView& q, const TensorView& k,
                           std::initializer_list<const TensorView*> like_q,
                           std::initializer_list<const TensorView*> like_k, const TensorView& lse,
                           bool longer_keys) {
  if (q.dtype != DType::Float32 && q.dtype != DType::Float64)
    throw Error(fmt::format("{}: dtype {} is not supported (float32 or float64 expected)", op, q.dtype));
  TG_CHECK(q.ndim() == 4 && k.ndim() == 4 && k.shape[0] == q.shape[0] &&
               (longer_keys ? k.shape[2] >= q.shape[2] : k.shape[2] == q.shape[2]) && k.shape[3] == q.shape[3] &&
               k.shape[1] > 0 && q.shape[1] % k.shape[1] == 0,
           "{}: need q [B, H, T, D] and k, v [B, Hkv, {}, D] with H a multiple of Hkv, got {}, {}", op,
           longer_keys ? "Tk ≥ T" : "T", q.shape, k.shape);
  for (const TensorView* t : like_q)
    TG_CHECK(t->shape == q.shape && t->dtype == q.dtype, "{}: a tensor of shape {} ({}) where {} ({}) is expected",
             op, t->shape, t->dtype, q.shape, q.dtype);
  for (const TensorView* t : like_k)
    TG_CHECK(t->shape == k.shape && t->dtype == q.dtype, "{}: a tensor of shape {} ({}) where {} ({}) is expected",
             op, t->shape, t->dtype, k.shape, q.dtype);
  for (const TensorView* t : {&q, &k})
    TG_CHECK(t->shape[3] <= 1 || t->strides[3] == 1, "{}: the head dimension D must have stride 1", op);
  for (const TensorView* t : like_q)
    TG_CHECK(t->shape[3] <= 1 || t->strides[3] == 1, "{}: the head dimension D must have stride 1", op);
  for (const TensorView* t : like_k)
    TG_CHECK(t->shape[3] <= 1 || t->strides[3] == 1, "{}: the head dimension D must have stride 1", op);
  TG_CHECK(lse.ndim() == 3 && lse.shape[0] == q.shape[0] && lse.shape[1] == q.shape[1] &&
               lse.shape[2] == q.shape[2] && lse.dtype == q.dtype,
           "{}: lse must be [B, H, T] = [{}, {}, {}] of {}, got {} {}", op, q.shape[0], q.shape[1], q.shape[2],
           q.dtype, lse.shape, lse.dtype);
  // grid (B·H, tiles of at least kWarps rows): gridDim.y ≤ 65535
  TG_CHECK(q.shape[2] <= int64_t(65535) * kWarps && q.shape[3] < (int64_t(1) << 30) &&
               k.shape[2] < (int64_t(1) << 30) && q.shape[0] * q.shape[1] < (int64_t(1) << 31) - 1,
           "{}: sizes {} (keys {}) are too large for the CUDA kernels", op, q.shape, k.shape);
  return {int(q.shape[2]), int(q.shape[3]), int(q.shape[1]), int(k.shape[1]), int(q.shape[1] / k.shape[1]),
          int(k.shape[2]), int(k.shape[2] - q.shape[2])};
}

unsigned tiles(int T, int rows_per_tile) { return unsigned((T + rows_per_tile - 1) / rows_per_tile); }

// The dynamic shared memory one block may opt in to (227 KiB on an H100); unlimited when emulated.
size_t max_shared_bytes() {
#if defined(TAPEGRAD_CUDA_EMULATED)
  return size_t(-1);
#else
  static const size_t limit = [] {
    int device = 0, bytes = 0;
    check(cudaGetDevice(&device), "causal_attention: cudaGetDevice");
    check(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
          "causal_attention: cudaDeviceGetAttribute");
    return size_t(bytes);
  }();
  return limit;
#endif
}

// Whether the register-tiled kernels take head size D (≤ 4 columns per lane) with `bytes` of shared memory.
bool tiled_kernels_fit(int D, size_t bytes) { return D <= 32 * 4 && bytes <= max_shared_bytes(); }

// Calls f(std::integral_constant<int, DPL>) with DPL = ⌈D/32⌉ columns per lane (1 to 4).
template <class F>
void with_columns_per_lane(int D, F&& f) {
  switch ((D + 31) / 32) {
    case 0:
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    default: return f(std::integral_constant<int, 4>{});
  }
}

template <class T>
void run_forward(const TensorView& out, const TensorView& lse, const TensorView& q, const TensorView& k,
                 const TensorView& v, const Dims& n, double scale) {
  constexpr int R = Tiles<T>::kRowsPerWarp, KPL = Tiles<T>::kKeysPerLane;
  const unsigned heads = unsigned(q.shape[0] * n.H);
  const T s = static_cast<T>(scale);
  const size_t bytes = forward_shared_bytes<T, R, KPL>(n.D);
  if (!tiled_kernels_fit(n.D, bytes)) {
    launch(&forward_rowwise_kernel<T>, dim3(heads, tiles(n.T, kWarps)), dim3(kThreads), 0, heads_of<T>(out),
           heads_of<T>(lse), heads_of<const T>(q), heads_of<const T>(k), heads_of<const T>(v), n, s);
    return;
  }
  with_columns_per_lane(n.D, [&](auto columns) {
    auto* kernel = &forward_kernel<T, R, KPL, decltype(columns)::value>;
    allow_shared_bytes(kernel, bytes);
    launch(kernel, dim3(heads, tiles(n.T, kWarps * R)), dim3(kThreads), bytes, heads_of<T>(out), heads_of<T>(lse),
           heads_of<const T>(q), heads_of<const T>(k), heads_of<const T>(v), n, s);
  });
}

template <class T>
void run_backward(CudaBackend& backend, const TensorView& grad_q, const TensorView& grad_k, const TensorView& grad_v,
                  const TensorView& grad_out, const TensorView& q, const TensorView& k, const TensorView& v,
                  const TensorView& out, const TensorView& lse, const Dims& n, double scale) {
  const int B = int(q.shape[0]);
  const T s = static_cast<T>(scale);
  // Δ [B, H, T] = rowwise dO·O, from the caching allocator (freed after the launches: stream order)
  const size_t delta_bytes = sizeof(T) * size_t(B) * size_t(n.H) * size_t(n.T);
  struct Buffer {
    CudaBackend& backend;
    void* p;
    size_t bytes;
    ~Buffer() { backend.deallocate(p, bytes); }
  } buffer{backend, backend.allocate(delta_bytes), delta_bytes};
  const T* delta = static_cast<const T*>(buffer.p);
  const int64_t rows = int64_t(B) * n.H * n.T;
  launch(&delta_kernel<T>, dim3(blocks_for(rows, kWarps)), dim3(kThreads), 0, static_cast<T*>(buffer.p),
         heads_of<const T>(grad_out), heads_of<const T>(out), B, n);

  // dK, dV: one block per (b, kv head, key tile)
  constexpr int RK = Tiles<T>::kKeyRowsPerWarp, QPL = Tiles<T>::kQueriesPerLane;
  const unsigned kv_heads = unsigned(B * n.Hkv);
  const size_t key_bytes = key_grad_shared_bytes<T, RK, QPL>(n.D);
  if (tiled_kernels_fit(n.D, key_bytes)) {
    with_columns_per_lane(n.D, [&](auto columns) {
      auto* kernel = &key_grad_kernel<T, RK, QPL, decltype(columns)::value>;
      allow_shared_bytes(kernel, key_bytes);
      launch(kernel, dim3(kv_heads, tiles(n.T, kWarps * RK)), dim3(kThreads), key_bytes, heads_of<T>(grad_k),
             heads_of<T>(grad_v), heads_of<const T>(grad_out), heads_of<const T>(q), heads_of<const T>(k),
             heads_of<const T>(v), heads_of<const T>(lse), delta, n, s);
    });
  } else {
    launch(&key_grad_rowwise_kernel<T>, dim3(kv_heads, tiles(n.T, kWarps)), dim3(kThreads), 0, heads_of<T>(grad_k),
           heads_of<T>(grad_v), heads_of<const T>(grad_out), heads_of<const T>(q), heads_of<const T>(k),
           heads_of<const T>(v), heads_of<const T>(lse), delta, n, s);
  }

  // dQ: one block per (b, head, query tile)
  constexpr int R = Tiles<T>::kRowsPerWarp, KPL = Tiles<T>::kKeysPerLane;
  const unsigned heads = unsigned(B * n.H);
  const size_t query_bytes = query_grad_shared_bytes<T, R, KPL>(n.D);
  if (tiled_kernels_fit(n.D, query_bytes)) {
    with_columns_per_lane(n.D, [&](auto columns) {
      auto* kernel = &query_grad_kernel<T, R, KPL, decltype(columns)::value>;
      allow_shared_bytes(kernel, query_bytes);
      launch(kernel, dim3(heads, tiles(n.T, kWarps * R)), dim3(kThreads), query_bytes, heads_of<T>(grad_q),
             heads_of<const T>(grad_out), heads_of<const T>(q), heads_of<const T>(k), heads_of<const T>(v),
             heads_of<const T>(lse), delta, n, s);
    });
  } else {
    launch(&query_grad_rowwise_kernel<T>, dim3(heads, tiles(n.T, kWarps)), dim3(kThreads), 0, heads_of<T>(grad_q),
           heads_of<const T>(grad_out), heads_of<const T>(q), heads_of<const T>(k), heads_of<const T>(v),
           heads_of<const T>(lse), delta, n, s);
  }
}

}  // namespace

void CudaBackend::causal_attention(const TensorView& out, const TensorView& lse, const TensorView& q,
                                   const TensorView& k, const TensorView& v, double scale) {
  const Dims n = check_attention_views("causal_attention", q, k, {&out}, {&v}, lse, /*longer_keys=*/true);
  if (q.shape[0] == 0 || n.H == 0 || n.T == 0) return;  // no rows (D = 0 still writes lse = log(t + 1))
  if (q.dtype == DType::Float32)
    run_forward<float>(out, lse, q, k, v, n, scale);
  else
    run_forward<double>(out, lse, q, k, v, n, scale);
}

void CudaBackend::causal_attention_backward(const TensorView& grad_q, const TensorView& grad_k,
                                            const TensorView& grad_v, const TensorView& grad_out,
                                            const TensorView& q, const TensorView& k, const TensorView& v,
                                            const TensorView& out, const TensorView& lse, double scale) {
  const Dims n = check_attention_views("causal_attention_backward", q, k, {&grad_q, &grad_out, &out},
                                       {&grad_k, &grad_v, &v}, lse, /*longer_keys=*/false);
  if (q.shape[0] == 0 || n.H == 0 || n.T == 0 || n.D == 0) return;  // every gradient is empty
  if (q.dtype == DType::Float32)
    run_backward<float>(*this, grad_q, grad_k, grad_v, grad_out, q, k, v, out, lse, n, scale);
  else
    run_backward<double>(*this, grad_q, grad_k, grad_v, grad_out, q, k, v, out, lse, n, scale);
}

}  // namespace tapegrad::kernels::cuda
