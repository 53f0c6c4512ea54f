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
// Kernels (every view has D stride 1, other strides are arbitrary; details above each kernel):
//   forward_kernel     grid (B·H, tiles of 64 query rows), heaviest (last) tiles first, 256 threads:
//                      Q tile in shared memory, K/V tiles of 64 keys staged in turn up to the causal
//                      limit; S = Q·Kᵀ as a 64 × 64 block of 4 × 4 thread tiles, online softmax per row
//                      (max and sum over the half-warp that shares the row), o += P·V from shared P.
//                      Writes o / l and lse = m + log l.
//   delta_kernel       one warp per row: Δ = Σ_d dO·O into a temporary [B, H, T] buffer.
//   key_grad_kernel    grid (B·Hkv, tiles of 64 keys): loops over the G query heads of the group and
//                      every query tile at or after the key tile, recomputing P = exp(S − lse) and dS,
//                      and accumulates dV += Pᵀ·dO and dK += dSᵀ·Q in registers; written once:
//                      deterministic, no atomics.
//   query_grad_kernel  grid (B·H, tiles of 64 query rows), the forward's layout: recomputes P and dS for
//                      the tile's rows and accumulates dQ += dS·K in registers; dQ = s·that.
// D > 128, float64 tiles that do not fit the device's shared memory, and decoding (a few query rows
// over a KV cache) run simple fallback kernels (*_rowwise_kernel): one warp per row, the accumulators
// in the output rows themselves (the forward's in shared memory). Float32 is accumulated in float, as the CPU backend (BLAS sgemm)
// does. Bfloat16 (storage S ≠ compute T): the blocked kernels load bf16, widen it into their float32
// shared tiles, compute as for float32 and round each output once; lse and Δ stay float32. The row-per-warp
// forward reads and writes bfloat16 itself (its query rows and accumulators in shared memory); the row-per-warp
// backward gets float32 copies (Float32Copy) of every operand. Bf16 with D ∈ {32, 64, 128} and 16-byte aligned rows
// runs on tensor cores instead (flash_attention_tc.cu), unless set_attention_impl(Simt). The backward recomputes every score with the forward's operation order (the same products
// summed in the same order of d), so P = exp(S − lse) is consistent with the lse the forward wrote.
// causal_attention_prefix (graph decoding): the row-per-warp forward over the first L keys, L read from device
// memory by the kernel (KeyCount), so one captured decode step replays at every position.
// Speed (H200, gpt2s shapes, 2026-11-26): docs/cuda.md.
#include <cmath>
#include <initializer_list>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/bfloat16.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/flash_attention_tc.h"
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

// ---- blocked kernels (D ≤ 128): 64 × 64 tiles, a 16 × 16 grid of threads, 4 × 4 per thread ----
//
// A block of 256 threads, thread (ty, tx) = (threadIdx.x / 16, threadIdx.x % 16). A "row" tile has
// 64 rows (queries, or keys in the dK/dV kernel); a "column" tile 64 positions. Thread (ty, tx) owns
//   rows 4·ty + i (i < 4)            — so the 16 threads of a half-warp share the same 4 rows,
//   columns tx + 16·c (c < 4)        — of every 64 × 64 score tile (S, dP, P, dS),
//   head columns col(tx, k) (k < DPT) — of the 64 × D accumulators (o, dQ, dK, dV),
// with DPT = 1, 2, 4 or 8 head columns per thread (16·DPT ≥ D). Each product is a small GEMM from
// shared memory: per 4 steps of d, 4 broadcast 16-byte loads of the thread's rows and 4 of its
// columns feed 64 FMAs (the old row-per-warp tiles fed 16). Row statistics (max, sum) are reduced
// over the half-warp with group16_max / group16_sum.
//
// Shared operands are [64][LD] row-major, LD = 16·DPT + 4 (zero-filled past D and past the
// sequence), so LD/4 is odd: the 8 lanes of a quarter-warp reading rows tx + 16c at one d hit 8
// different 16-byte bank groups, and a row's DPT columns are one aligned 4-, 8- or 16-byte load.
// Score tiles (P, dS) are [64][PLD = 68] row-major, written by columns (conflict-free) and read 4
// columns at a time by rows (broadcast).
constexpr int kBlockThreads = 256, kTile = 64, kScoreLd = kTile + 4;

// The head columns thread tx owns: DPT ≥ 4 → 4 consecutive columns in each 64-column half
// (aligned 16-byte loads, a quarter-warp reads 128 contiguous bytes); DPT < 4 → DPT consecutive.
template <int DPT>
__host__ __device__ inline int head_col(int tx, int k) {
  if constexpr (DPT >= 4)
    return 64 * (k / 4) + 4 * tx + k % 4;
  else
    return DPT * tx + k;
}
template <int DPT>
constexpr int operand_ld() {
  return 16 * DPT + 4;
}

// v[k] = row[head_col(tx, k)], k < DPT (row: one shared operand row; aligned by construction).
template <int DPT, class T>
__device__ inline void load_head_cols(const T* row, int tx, T (&v)[DPT]) {
  if constexpr (DPT >= 4) {
ATTENTION_UNROLL
    for (int h = 0; h < DPT / 4; ++h) {
      T four[4];
      load4(row + 64 * h + 4 * tx, four);
ATTENTION_UNROLL
      for (int e = 0; e < 4; ++e) v[4 * h + e] = four[e];
    }
  } else {
ATTENTION_UNROLL
    for (int k = 0; k < DPT; ++k) v[k] = row[DPT * tx + k];
  }
}

// dst[r][d] (r < 64, d < 16·DPT, row stride LD) = src row (row0 + r), column d, where row0 + r < rows
// and d < D, else 0. Threads over d first: coalesced global reads, conflict-free shared writes.
template <int DPT, class T, class S>
__device__ inline void load_operand(T* dst, const S* src, int64_t ld, int row0, int rows, int D) {
  constexpr int W = 16 * DPT, LD = operand_ld<DPT>();
  for (int idx = threadIdx.x; idx < kTile * W; idx += kBlockThreads) {
    const int r = idx / W, d = idx % W, t = row0 + r;
    dst[r * LD + d] = t < rows && d < D ? static_cast<T>(src[int64_t(t) * ld + d]) : T(0);
  }
}

// acc[i][c] += Σ_d A[4ty + i][d]·Bm[tx + 16c][d] over d < D4 (a multiple of 4; both operands are
// zero past D): the 4 × 4 score block of thread (ty, tx).
template <int DPT, class T>
__device__ inline void score_block(T (&acc)[4][4], const T* A, const T* Bm, int D4, int ty, int tx) {
  constexpr int LD = operand_ld<DPT>();
  for (int d = 0; d < D4; d += 4) {
    T a[4][4], b[4][4];
ATTENTION_UNROLL
    for (int i = 0; i < 4; ++i) load4(A + (4 * ty + i) * LD + d, a[i]);
ATTENTION_UNROLL
    for (int c = 0; c < 4; ++c) load4(Bm + (tx + 16 * c) * LD + d, b[c]);
ATTENTION_UNROLL
    for (int i = 0; i < 4; ++i)
ATTENTION_UNROLL
      for (int c = 0; c < 4; ++c)
ATTENTION_UNROLL
        for (int e = 0; e < 4; ++e) acc[i][c] += a[i][e] * b[c][e];
  }
}

// acc[i][k] += Σ_{j < n4} W[4ty + i][j]·M[j][head_col(tx, k)]: W a score tile (row stride kScoreLd,
// zero where masked), M a shared operand; n4 a multiple of 4 (W's extra columns are zero).
template <int DPT, class T>
__device__ inline void accumulate_block(T (&acc)[4][DPT], const T* W, const T* M, int n4, int ty, int tx) {
  constexpr int LD = operand_ld<DPT>();
  for (int j = 0; j < n4; j += 4) {
    T w[4][4];
ATTENTION_UNROLL
    for (int i = 0; i < 4; ++i) load4(W + (4 * ty + i) * kScoreLd + j, w[i]);
ATTENTION_UNROLL
    for (int e = 0; e < 4; ++e) {
      T m[DPT];
      load_head_cols<DPT>(M + (j + e) * LD, tx, m);
ATTENTION_UNROLL
      for (int i = 0; i < 4; ++i)
ATTENTION_UNROLL
        for (int k = 0; k < DPT; ++k) acc[i][k] += w[i][e] * m[k];
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

// Shared bytes of the blocked kernels: `operands` [64][LD] tiles and `scores` [64][68] tiles (+ 2·64 values).
template <class T, int DPT>
size_t blocked_shared_bytes(int operands, int scores, bool row_values = false) {
  return sizeof(T) * (size_t(operands) * kTile * operand_ld<DPT>() + size_t(scores) * kTile * kScoreLd +
                      (row_values ? 2 * kTile : 0));
}

// ---- forward ----

// out [B, H, T, D], lse [B, H, T]. grid (B·H, query tiles), the longest rows first. Per key tile:
// S = s·Q·Kᵀ masked (key j ≤ t + off, j < Tk), online softmax per row (m = running max, l = this
// thread's part of the running sum), o = o·exp(m − m') + P·V; at the end o / l and lse = m + log l.
template <class T, int DPT, class S>
__global__ void __launch_bounds__(kBlockThreads)
    forward_kernel(Heads<S> out, Heads<T> lse, Heads<const S> q, Heads<const S> k, Heads<const S> v, Dims n,
                   T scale) {
  constexpr int LD = operand_ld<DPT>();
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  TG_DYNAMIC_SHARED(T, smem);
  T* Qs = smem;              // [64, LD]
  T* Ks = Qs + kTile * LD;   // [64, LD]
  T* Vs = Ks + kTile * LD;   // [64, LD]
  T* Ps = Vs + kTile * LD;   // [64, 68]  unnormalised probabilities of the tile

  const int b = blockIdx.x / n.H, h = blockIdx.x % n.H, kv = h / n.G;
  const int row0 = (gridDim.y - 1 - blockIdx.y) * kTile;
  const int key_end = min_of(n.Tk, row0 + kTile + n.off);  // keys ≤ the block's last row
  const int D4 = round_up4(n.D);
  load_operand<DPT>(Qs, q.at(b, h), q.st, row0, n.T, n.D);

  T m[4], l[4], o[4][DPT];
ATTENTION_UNROLL
  for (int i = 0; i < 4; ++i) m[i] = negative_infinity<T>(), l[i] = T(0);
  zero(o);
  for (int k0 = 0; k0 < key_end; k0 += kTile) {
    __syncthreads();  // the previous tile's readers are done (and Qs is complete)
    load_operand<DPT>(Ks, k.at(b, kv), k.st, k0, n.Tk, n.D);
    load_operand<DPT>(Vs, v.at(b, kv), v.st, k0, n.Tk, n.D);
    __syncthreads();
    T s[4][4];
    zero(s);
    score_block<DPT>(s, Qs, Ks, D4, ty, tx);
ATTENTION_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int t = row0 + 4 * ty + i;
      T tile_max = negative_infinity<T>();
ATTENTION_UNROLL
      for (int c = 0; c < 4; ++c) {
        const int j = k0 + tx + 16 * c;
        s[i][c] = j <= t + n.off && j < n.Tk && t < n.T ? scale * s[i][c] : negative_infinity<T>();
        tile_max = s[i][c] > tile_max ? s[i][c] : tile_max;
      }
      tile_max = group16_max(tile_max);
      // m' = max(m, max_j S_tj); the sum and the output so far are rescaled by exp(m − m')
      const T m_new = m[i] > tile_max ? m[i] : tile_max;
      const T m_ref = m_new == negative_infinity<T>() ? T(0) : m_new;  // rows past T see no key
      const T rescale = exp_of(m[i] - m_ref);
      m[i] = m_new;
      T p_sum = T(0);
ATTENTION_UNROLL
      for (int c = 0; c < 4; ++c) {
        const T p = exp_of(s[i][c] - m_ref);
        Ps[(4 * ty + i) * kScoreLd + tx + 16 * c] = p;
        p_sum += p;
      }
      l[i] = l[i] * rescale + p_sum;
ATTENTION_UNROLL
      for (int kk = 0; kk < DPT; ++kk) o[i][kk] *= rescale;
    }
    __syncthreads();
    accumulate_block<DPT>(o, Ps, Vs, round_up4(min_of(kTile, key_end - k0)), ty, tx);
  }

  S* oh = out.at(b, h);
  T* lh = lse.at(b, h);
ATTENTION_UNROLL
  for (int i = 0; i < 4; ++i) {
    const T sum = group16_sum(l[i]);
    const int t = row0 + 4 * ty + i;
    if (t >= n.T) continue;
    const T inv = T(1) / sum;
ATTENTION_UNROLL
    for (int kk = 0; kk < DPT; ++kk) {
      const int d = head_col<DPT>(tx, kk);
      if (d < n.D) oh[int64_t(t) * out.st + d] = S(o[i][kk] * inv);
    }
    if (tx == 0) lh[int64_t(t) * lse.st] = m[i] + log_of(sum);
  }
}

// ---- backward ----

// delta[(b·H + h)·T + t] = Σ_d dO[b, h, t, d]·O[b, h, t, d]; one warp per row.
template <class T, class S>
__global__ void __launch_bounds__(kThreads)
    delta_kernel(T* delta, Heads<const S> grad_out, Heads<const S> out, int B, Dims n) {
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
      const S* g = grad_out.at(b, h) + t * grad_out.st;
      const S* o = out.at(b, h) + t * out.st;
      for (int d = lane; d < n.D; d += 32) dot += static_cast<T>(g[d]) * static_cast<T>(o[d]);
    }
    dot = warp_sum(dot);
    if (row < rows && lane == 0) delta[row] = dot;
  }
}

// grad_k, grad_v [B, Hkv, T, D] of one tile of 64 keys of one kv head (rows = keys, columns =
// queries): for each query head of the group and each query tile at or after the key tile,
// Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ, Pᵀ = exp(s·Sᵀ − lse), dSᵀ = Pᵀ (dPᵀ − Δ); dV += Pᵀ·dO, dK += dSᵀ·Q in
// registers, written once (deterministic, no atomics). grid (B·Hkv, key tiles), the longest first.
template <class T, int DPT, class S>
__global__ void __launch_bounds__(kBlockThreads)
    key_grad_kernel(Heads<S> grad_k, Heads<S> grad_v, Heads<const S> grad_out, Heads<const S> q, Heads<const S> k,
                    Heads<const S> v, Heads<const T> lse, const T* delta, Dims n, T scale) {
  constexpr int LD = operand_ld<DPT>();
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  TG_DYNAMIC_SHARED(T, smem);
  T* Ks = smem;                     // [64, LD]
  T* Vs = Ks + kTile * LD;          // [64, LD]
  T* Qs = Vs + kTile * LD;          // [64, LD]
  T* dOs = Qs + kTile * LD;         // [64, LD]
  T* Ps = dOs + kTile * LD;         // [64, 68]  Pᵀ of the tile
  T* dSs = Ps + kTile * kScoreLd;   // [64, 68]  dSᵀ of the tile
  T* lse_s = dSs + kTile * kScoreLd;  // [64]
  T* delta_s = lse_s + kTile;         // [64]

  const int b = blockIdx.x / n.Hkv, kv = blockIdx.x % n.Hkv;
  const int key0 = blockIdx.y * kTile;
  const int D4 = round_up4(n.D);
  load_operand<DPT>(Ks, k.at(b, kv), k.st, key0, n.T, n.D);
  load_operand<DPT>(Vs, v.at(b, kv), v.st, key0, n.T, n.D);

  T dk[4][DPT], dv[4][DPT];
  zero(dk);
  zero(dv);
  for (int g = 0; g < n.G; ++g) {
    const int h = kv * n.G + g;
    const T* lh = lse.at(b, h);
    const T* delta_h = delta + (int64_t(b) * n.H + h) * n.T;
    for (int q0 = key0; q0 < n.T; q0 += kTile) {  // query tiles that see a key of this tile
      __syncthreads();  // the previous tile's readers are done (and Ks, Vs are complete)
      load_operand<DPT>(Qs, q.at(b, h), q.st, q0, n.T, n.D);
      load_operand<DPT>(dOs, grad_out.at(b, h), grad_out.st, q0, n.T, n.D);
      for (int i = threadIdx.x; i < kTile; i += kBlockThreads) {
        const int t = q0 + i;
        lse_s[i] = t < n.T ? lh[int64_t(t) * lse.st] : T(0);
        delta_s[i] = t < n.T ? delta_h[t] : T(0);
      }
      __syncthreads();
      T s[4][4], dp[4][4];
      zero(s);
      zero(dp);
      score_block<DPT>(s, Ks, Qs, D4, ty, tx);
      score_block<DPT>(dp, Vs, dOs, D4, ty, tx);
ATTENTION_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int j = key0 + 4 * ty + i;
ATTENTION_UNROLL
        for (int c = 0; c < 4; ++c) {
          const int col = tx + 16 * c, t = q0 + col;
          // P = exp(s·q·k − lse), dS = P (dP − Δ); zero above the diagonal and past T
          const T p = j <= t && t < n.T ? exp_of(scale * s[i][c] - lse_s[col]) : T(0);
          Ps[(4 * ty + i) * kScoreLd + col] = p;
          dSs[(4 * ty + i) * kScoreLd + col] = p * (dp[i][c] - delta_s[col]);
        }
      }
      __syncthreads();
      const int rows4 = round_up4(min_of(kTile, n.T - q0));
      accumulate_block<DPT>(dv, Ps, dOs, rows4, ty, tx);
      accumulate_block<DPT>(dk, dSs, Qs, rows4, ty, tx);
    }
  }

  S* dkh = grad_k.at(b, kv);
  S* dvh = grad_v.at(b, kv);
ATTENTION_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int j = key0 + 4 * ty + i;
    if (j >= n.T) continue;
ATTENTION_UNROLL
    for (int kk = 0; kk < DPT; ++kk) {
      const int d = head_col<DPT>(tx, kk);
      if (d >= n.D) continue;
      dkh[int64_t(j) * grad_k.st + d] = S(scale * dk[i][kk]);
      dvh[int64_t(j) * grad_v.st + d] = S(dv[i][kk]);
    }
  }
}

// grad_q [B, H, T, D] of one tile of 64 query rows (rows = queries, columns = keys): per key tile up
// to the diagonal, S = Q·Kᵀ and dP = dO·Vᵀ, dS = exp(s·S − lse)(dP − Δ), dQ += dS·K; dQ = s·that.
// grid (B·H, query tiles), the longest rows first.
template <class T, int DPT, class S>
__global__ void __launch_bounds__(kBlockThreads)
    query_grad_kernel(Heads<S> grad_q, Heads<const S> grad_out, Heads<const S> q, Heads<const S> k,
                      Heads<const S> v, Heads<const T> lse, const T* delta, Dims n, T scale) {
  constexpr int LD = operand_ld<DPT>();
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  TG_DYNAMIC_SHARED(T, smem);
  T* Qs = smem;              // [64, LD]
  T* dOs = Qs + kTile * LD;  // [64, LD]
  T* Ks = dOs + kTile * LD;  // [64, LD]
  T* Vs = Ks + kTile * LD;   // [64, LD]
  T* dSs = Vs + kTile * LD;  // [64, 68]  dS of the tile

  const int b = blockIdx.x / n.H, h = blockIdx.x % n.H, kv = h / n.G;
  const int row0 = (gridDim.y - 1 - blockIdx.y) * kTile;
  const int key_end = min_of(n.T, row0 + kTile);
  const int D4 = round_up4(n.D);
  load_operand<DPT>(Qs, q.at(b, h), q.st, row0, n.T, n.D);
  load_operand<DPT>(dOs, grad_out.at(b, h), grad_out.st, row0, n.T, n.D);
  T row_lse[4], row_delta[4];
ATTENTION_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int t = row0 + 4 * ty + i;
    row_lse[i] = t < n.T ? lse.at(b, h)[int64_t(t) * lse.st] : T(0);
    row_delta[i] = t < n.T ? delta[(int64_t(b) * n.H + h) * n.T + t] : T(0);
  }

  T dq[4][DPT];
  zero(dq);
  for (int k0 = 0; k0 < key_end; k0 += kTile) {
    __syncthreads();  // the previous tile's readers are done (and Qs, dOs are complete)
    load_operand<DPT>(Ks, k.at(b, kv), k.st, k0, n.T, n.D);
    load_operand<DPT>(Vs, v.at(b, kv), v.st, k0, n.T, n.D);
    __syncthreads();
    T s[4][4], dp[4][4];
    zero(s);
    zero(dp);
    score_block<DPT>(s, Qs, Ks, D4, ty, tx);
    score_block<DPT>(dp, dOs, Vs, D4, ty, tx);
ATTENTION_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int t = row0 + 4 * ty + i;
ATTENTION_UNROLL
      for (int c = 0; c < 4; ++c) {
        const int j = k0 + tx + 16 * c;
        // dS = P (dP − Δ) with P = exp(s·q·k − lse); zero above the diagonal and past T
        const T p = j <= t && t < n.T ? exp_of(scale * s[i][c] - row_lse[i]) : T(0);
        dSs[(4 * ty + i) * kScoreLd + tx + 16 * c] = p * (dp[i][c] - row_delta[i]);
      }
    }
    __syncthreads();
    accumulate_block<DPT>(dq, dSs, Ks, round_up4(min_of(kTile, key_end - k0)), ty, tx);
  }

  S* dqh = grad_q.at(b, h);
ATTENTION_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int t = row0 + 4 * ty + i;
    if (t >= n.T) continue;
ATTENTION_UNROLL
    for (int kk = 0; kk < DPT; ++kk) {
      const int d = head_col<DPT>(tx, kk);
      if (d < n.D) dqh[int64_t(t) * grad_q.st + d] = S(scale * dq[i][kk]);
    }
  }
}

// ---- fallback for D > 128 and decoding: one warp per row ----

// Σ_d a[d]·b[d] with four interleaved partial sums (closer to BLAS's rounding than one running sum); b is
// read in its storage type U and converted to T (exact for bfloat16 → float: the same bits as a widened copy).
template <class T, class U>
__device__ inline T dot_product(const T* a, const U* b, int D) {
  T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
  int d = 0;
  for (; d + 4 <= D; d += 4) {
    s0 += a[d] * static_cast<T>(b[d]);
    s1 += a[d + 1] * static_cast<T>(b[d + 1]);
    s2 += a[d + 2] * static_cast<T>(b[d + 2]);
    s3 += a[d + 3] * static_cast<T>(b[d + 3]);
  }
  for (; d < D; ++d) s0 += a[d] * static_cast<T>(b[d]);
  return (s0 + s1) + (s2 + s3);
}

// The key count of causal_attention_prefix, in device memory (count == nullptr: the plain forward, all Tk keys).
struct KeyCount {
  const int64_t* count;
  DeviceErrorRecord* errors;
};

// Forward, one query row t per warp: lane ℓ scores key k0 + ℓ, online softmax as above. The warp's query row
// (widened to T) and its output accumulators o_t live in dynamic shared memory, [kWarps][D] each: q, k, v and
// out are read and written in their storage type S (bfloat16 widened on load, out rounded once at the end), so
// a bf16 decode step is this one kernel — no float32 copy of q, out or the KV cache. The arithmetic is in T
// and in the same order as with float32 copies, so the bits are those of the widened call.
// With a key count: L = *count is read when the kernel runs (a replayed CUDA graph sees the current value)
// and checked, T ≤ L ≤ Tk (else reported as a device error by one thread, and nothing is written); then
// the kernel runs exactly as on keys narrowed to L: Tk = L, off = L − T.
template <class T, class S>
__global__ void __launch_bounds__(kThreads)
    forward_rowwise_kernel(Heads<S> out, Heads<T> lse, Heads<const S> q, Heads<const S> k, Heads<const S> v,
                           Dims n, T scale, KeyCount key_count) {
  if (key_count.count != nullptr) {  // uniform over the grid: every thread returns, or none
    const int64_t L = *key_count.count;
    if (L < n.T || L > n.Tk) {
      if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)
        report_bad_index(key_count.errors, DeviceErrorCode::AttentionKeyCount, L, n.Tk, n.T);
      return;
    }
    n.Tk = static_cast<int>(L);
    n.off = static_cast<int>(L) - n.T;
  }
  __shared__ T p_tile[kWarps][32];
  TG_DYNAMIC_SHARED(T, smem);  // [kWarps][D] query rows, then [kWarps][D] output accumulators
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int b = blockIdx.x / n.H, h = blockIdx.x % n.H, kv = h / n.G;
  const int first_row = (gridDim.y - 1 - blockIdx.y) * kWarps, t = first_row + warp;
  const int key_end = min_of(n.Tk, first_row + kWarps + n.off);
  const bool active = t < n.T;
  T* qrow = smem + warp * n.D;
  T* orow = smem + (kWarps + warp) * n.D;
  const S* kh = k.at(b, kv);
  const S* vh = v.at(b, kv);
  if (active) {
    const S* q_in = q.at(b, h) + t * q.st;
    for (int d = lane; d < n.D; d += 32) qrow[d] = static_cast<T>(q_in[d]), orow[d] = T(0);
  }
  __syncthreads();  // the whole row is read by every lane below
  T m = negative_infinity<T>(), l = T(0);
  for (int k0 = 0; k0 < key_end; k0 += 32) {
    const int j = k0 + lane;
    T s = negative_infinity<T>();
    if (active && j <= t + n.off) {
      const S* krow = kh + j * k.st;
      s = scale * dot_product(static_cast<const T*>(qrow), krow, n.D);
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
        for (int jj = 0; jj < keys; ++jj) acc += p_tile[warp][jj] * static_cast<T>(vh[(k0 + jj) * v.st + d]);
        orow[d] = orow[d] * rescale + acc;
      }
    }
    __syncthreads();
  }
  const T sum = warp_sum(l);
  if (active) {
    const T inv = T(1) / sum;
    S* out_row = out.at(b, h) + t * out.st;
    for (int d = lane; d < n.D; d += 32) out_row[d] = static_cast<S>(orow[d] * inv);
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

template <class Kernel>
void allow_shared_bytes(Kernel* kernel, size_t bytes) {
  allow_kernel_shared_bytes(reinterpret_cast<const void*>(kernel), bytes);
}

// The host-side checks of both directions: float dtypes, 4-d views of matching shapes, D stride 1.
// longer_keys: k, v may have more positions than q (the forward over a KV cache).
Dims check_attention_views(const char* op, const TensorView& q, const TensorView& k,
                           std::initializer_list<const TensorView*> like_q,
                           std::initializer_list<const TensorView*> like_k, const TensorView& lse,
                           bool longer_keys) {
  if (q.dtype != DType::Float32 && q.dtype != DType::Float64 && q.dtype != DType::BFloat16)
    throw Error(fmt::format("{}: dtype {} is not supported (float32, float64 or bfloat16 expected)", op, q.dtype));
  // lse is a statistic: float32 for bfloat16 attention, else q's dtype
  const DType lse_dtype = q.dtype == DType::BFloat16 ? DType::Float32 : q.dtype;
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
               lse.shape[2] == q.shape[2] && lse.dtype == lse_dtype,
           "{}: lse must be [B, H, T] = [{}, {}, {}] of {}, got {} {}", op, q.shape[0], q.shape[1], q.shape[2],
           lse_dtype, lse.shape, lse.dtype);
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

// Whether the blocked kernels take head size D (≤ 128: 8 head columns per thread) with `bytes` of
// shared memory (float64 at D > 64 needs more than a block may have: the row-per-warp kernels).
bool blocked_kernels_fit(int D, size_t bytes) { return D <= 128 && bytes <= max_shared_bytes(); }

// Calls f(std::integral_constant<int, DPT>) with DPT = 1, 2, 4 or 8 head columns per thread (16·DPT ≥ D).
template <class F>
void with_head_cols_per_thread(int D, F&& f) {
  if (D <= 16) return f(std::integral_constant<int, 1>{});
  if (D <= 32) return f(std::integral_constant<int, 2>{});
  if (D <= 64) return f(std::integral_constant<int, 4>{});
  return f(std::integral_constant<int, 8>{});
}

// A float32 copy of a bfloat16 view (contiguous, from the caching allocator): the row-per-warp kernels
// accumulate in their output rows, which must then be float32, so bf16 reaches them widened (the forward:
// only q and out; the backward: every operand).
class Float32Copy {
 public:
  Float32Copy(CudaBackend& backend, const TensorView& like)
      : buffer_(backend, sizeof(float) * size_t(like.numel())) {
    view_.data = buffer_.as<void>();
    view_.dtype = DType::Float32;
    view_.shape = like.shape;
    view_.strides = contiguous_strides(like.shape);
  }
  const TensorView& view() const { return view_; }

 private:
  ScratchBuffer buffer_;
  TensorView view_;
};

// The row-per-warp forward: one launch, any storage type (bfloat16 read and written in place, computed in float32).
template <class T, class S>
void run_forward_rowwise(const TensorView& out, const TensorView& lse, const TensorView& q, const TensorView& k,
                         const TensorView& v, const Dims& n, double scale, KeyCount key_count) {
  const dim3 grid(unsigned(q.shape[0] * n.H), tiles(n.T, kWarps));
  const size_t bytes = size_t(2 * kWarps) * size_t(n.D) * sizeof(T);
  auto* kernel = &forward_rowwise_kernel<T, S>;
  allow_shared_bytes(kernel, bytes);
  launch(kernel, grid, dim3(kThreads), bytes, heads_of<S>(out), heads_of<T>(lse), heads_of<const S>(q),
         heads_of<const S>(k), heads_of<const S>(v), n, static_cast<T>(scale), key_count);
}

template <class T, class S>
void run_forward(const TensorView& out, const TensorView& lse, const TensorView& q, const TensorView& k,
                 const TensorView& v, const Dims& n, double scale) {
  const unsigned heads = unsigned(q.shape[0] * n.H);
  const T s = static_cast<T>(scale);
  bool done = false;
  // A few query rows over a KV cache (decoding) would leave most of a 64-row tile idle: row per warp.
  const bool decoding = n.off > 0 && n.T < 16;
  if (!decoding && n.D <= 128) {
    with_head_cols_per_thread(n.D, [&](auto dpt) {
      constexpr int DPT = decltype(dpt)::value;
      const size_t bytes = blocked_shared_bytes<T, DPT>(3, 1);
      if (!blocked_kernels_fit(n.D, bytes)) return;
      auto* kernel = &forward_kernel<T, DPT, S>;
      allow_shared_bytes(kernel, bytes);
      launch(kernel, dim3(heads, tiles(n.T, kTile)), dim3(kBlockThreads), bytes, heads_of<S>(out), heads_of<T>(lse),
             heads_of<const S>(q), heads_of<const S>(k), heads_of<const S>(v), n, s);
      done = true;
    });
  }
  if (done) return;
  run_forward_rowwise<T, S>(out, lse, q, k, v, n, scale, KeyCount{nullptr, nullptr});
}

template <class T, class S>
void run_backward(CudaBackend& backend, const TensorView& grad_q, const TensorView& grad_k, const TensorView& grad_v,
                  const TensorView& grad_out, const TensorView& q, const TensorView& k, const TensorView& v,
                  const TensorView& out, const TensorView& lse, const Dims& n, double scale) {
  const int B = int(q.shape[0]);
  const T s = static_cast<T>(scale);
  const unsigned kv_heads = unsigned(B * n.Hkv), heads = unsigned(B * n.H);
  bool blocked = false;
  if (n.D <= 128)
    with_head_cols_per_thread(n.D, [&](auto dpt) {
      constexpr int DPT = decltype(dpt)::value;
      blocked = blocked_kernels_fit(n.D, blocked_shared_bytes<T, DPT>(4, 2, /*row_values=*/true)) &&
                blocked_kernels_fit(n.D, blocked_shared_bytes<T, DPT>(4, 1));
    });
  if constexpr (!std::is_same_v<S, T>) {
    if (!blocked) {  // bfloat16 on the row-per-warp kernels: widened, as in the forward
      const Float32Copy q32(backend, q), k32(backend, k), v32(backend, v), o32(backend, out), g32(backend, grad_out);
      const Float32Copy dq32(backend, grad_q), dk32(backend, grad_k), dv32(backend, grad_v);
      backend.copy(q32.view(), q);
      backend.copy(k32.view(), k);
      backend.copy(v32.view(), v);
      backend.copy(o32.view(), out);
      backend.copy(g32.view(), grad_out);
      run_backward<float, float>(backend, dq32.view(), dk32.view(), dv32.view(), g32.view(), q32.view(), k32.view(),
                                 v32.view(), o32.view(), lse, n, scale);
      backend.copy(grad_q, dq32.view());
      backend.copy(grad_k, dk32.view());
      backend.copy(grad_v, dv32.view());
      return;
    }
  }
  // Δ [B, H, T] = rowwise dO·O, from the caching allocator (freed after the launches: stream order)
  const size_t delta_bytes = sizeof(T) * size_t(B) * size_t(n.H) * size_t(n.T);
  const ScratchBuffer buffer(backend, delta_bytes);
  const T* delta = buffer.as<const T>();
  const int64_t rows = int64_t(B) * n.H * n.T;
  launch(&delta_kernel<T, S>, dim3(blocks_for(rows, kWarps)), dim3(kThreads), 0, buffer.as<T>(),
         heads_of<const S>(grad_out), heads_of<const S>(out), B, n);

  if (blocked) {
    with_head_cols_per_thread(n.D, [&](auto dpt) {
      constexpr int DPT = decltype(dpt)::value;
      const size_t key_bytes = blocked_shared_bytes<T, DPT>(4, 2, /*row_values=*/true);
      const size_t query_bytes = blocked_shared_bytes<T, DPT>(4, 1);
      // dK, dV: one block per (b, kv head, key tile); dQ: one block per (b, head, query tile)
      auto* key_kernel = &key_grad_kernel<T, DPT, S>;
      allow_shared_bytes(key_kernel, key_bytes);
      launch(key_kernel, dim3(kv_heads, tiles(n.T, kTile)), dim3(kBlockThreads), key_bytes, heads_of<S>(grad_k),
             heads_of<S>(grad_v), heads_of<const S>(grad_out), heads_of<const S>(q), heads_of<const S>(k),
             heads_of<const S>(v), heads_of<const T>(lse), delta, n, s);
      auto* query_kernel = &query_grad_kernel<T, DPT, S>;
      allow_shared_bytes(query_kernel, query_bytes);
      launch(query_kernel, dim3(heads, tiles(n.T, kTile)), dim3(kBlockThreads), query_bytes, heads_of<S>(grad_q),
             heads_of<const S>(grad_out), heads_of<const S>(q), heads_of<const S>(k), heads_of<const S>(v),
             heads_of<const T>(lse), delta, n, s);
    });
    return;
  }
  if constexpr (std::is_same_v<S, T>) {
    launch(&key_grad_rowwise_kernel<T>, dim3(kv_heads, tiles(n.T, kWarps)), dim3(kThreads), 0, heads_of<T>(grad_k),
           heads_of<T>(grad_v), heads_of<const T>(grad_out), heads_of<const T>(q), heads_of<const T>(k),
           heads_of<const T>(v), heads_of<const T>(lse), delta, n, s);
    launch(&query_grad_rowwise_kernel<T>, dim3(heads, tiles(n.T, kWarps)), dim3(kThreads), 0, heads_of<T>(grad_q),
           heads_of<const T>(grad_out), heads_of<const T>(q), heads_of<const T>(k), heads_of<const T>(v),
           heads_of<const T>(lse), delta, n, s);
  }
}

}  // namespace

void allow_kernel_shared_bytes(const void* kernel, size_t bytes) {
#if defined(TAPEGRAD_CUDA_EMULATED)
  (void)kernel, (void)bytes;
#else
  if (bytes <= 48 * 1024) return;
  static std::mutex mu;
  static std::vector<std::pair<const void*, size_t>> granted;  // kernel → bytes already allowed
  std::lock_guard<std::mutex> lock(mu);
  for (auto& [kern, allowed] : granted)
    if (kern == kernel) {
      if (bytes <= allowed) return;
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
            "causal_attention: cudaFuncSetAttribute");
      allowed = bytes;
      return;
    }
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
        "causal_attention: cudaFuncSetAttribute");
  granted.emplace_back(kernel, bytes);
#endif
}

void CudaBackend::causal_attention(const TensorView& out, const TensorView& lse, const TensorView& q,
                                   const TensorView& k, const TensorView& v, double scale) {
  const Dims n = check_attention_views("causal_attention", q, k, {&out}, {&v}, lse, /*longer_keys=*/true);
  if (q.shape[0] == 0 || n.H == 0 || n.T == 0) return;  // no rows (D = 0 still writes lse = log(t + 1))
  if (q.dtype == DType::BFloat16 && flash_tc_takes_forward(q, k, v))
    flash_tc_forward(out, lse, q, k, v, scale);
  else if (q.dtype == DType::BFloat16)
    run_forward<float, bfloat16>(out, lse, q, k, v, n, scale);
  else if (q.dtype == DType::Float32)
    run_forward<float, float>(out, lse, q, k, v, n, scale);
  else
    run_forward<double, double>(out, lse, q, k, v, n, scale);
}

// Always the row-per-warp forward (decoding: T = 1, or a few rows): one captured launch serves every key count.
// For L > T and T < 16 causal_attention on the narrowed k, v runs the same kernel with the same bounds (bit for
// bit); at L = T or T ≥ 16 it runs the blocked or tensor-core kernels, which round differently.
void CudaBackend::causal_attention_prefix(const TensorView& out, const TensorView& lse, const TensorView& q,
                                          const TensorView& k, const TensorView& v, const TensorView& key_count,
                                          double scale) {
  const Dims n = check_attention_views("causal_attention_prefix", q, k, {&out}, {&v}, lse, /*longer_keys=*/true);
  TG_CHECK(key_count.dtype == DType::Int64 && key_count.numel() == 1,
           "causal_attention_prefix: key_count must be one int64 element on the device, got {} {}", key_count.dtype,
           key_count.shape);
  if (q.shape[0] == 0 || n.H == 0 || n.T == 0) return;  // no rows
  const KeyCount count{static_cast<const int64_t*>(key_count.data), device_error_record()};
  if (q.dtype == DType::BFloat16)
    run_forward_rowwise<float, bfloat16>(out, lse, q, k, v, n, scale, count);
  else if (q.dtype == DType::Float32)
    run_forward_rowwise<float, float>(out, lse, q, k, v, n, scale, count);
  else
    run_forward_rowwise<double, double>(out, lse, q, k, v, n, scale, count);
}

void CudaBackend::causal_attention_backward(const TensorView& grad_q, const TensorView& grad_k,
                                            const TensorView& grad_v, const TensorView& grad_out,
                                            const TensorView& q, const TensorView& k, const TensorView& v,
                                            const TensorView& out, const TensorView& lse, double scale) {
  const Dims n = check_attention_views("causal_attention_backward", q, k, {&grad_q, &grad_out, &out},
                                       {&grad_k, &grad_v, &v}, lse, /*longer_keys=*/false);
  if (q.shape[0] == 0 || n.H == 0 || n.T == 0 || n.D == 0) return;  // every gradient is empty
  if (q.dtype == DType::BFloat16 && flash_tc_takes_backward(q, k, v, grad_out, out))
    flash_tc_backward(*this, grad_q, grad_k, grad_v, grad_out, q, k, v, out, lse, scale);
  else if (q.dtype == DType::BFloat16)
    run_backward<float, bfloat16>(*this, grad_q, grad_k, grad_v, grad_out, q, k, v, out, lse, n, scale);
  else if (q.dtype == DType::Float32)
    run_backward<float, float>(*this, grad_q, grad_k, grad_v, grad_out, q, k, v, out, lse, n, scale);
  else
    run_backward<double, double>(*this, grad_q, grad_k, grad_v, grad_out, q, k, v, out, lse, n, scale);
}

}  // namespace tapegrad::kernels::cuda
