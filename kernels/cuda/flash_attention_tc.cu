// flash_attention_tc.cu — causal attention in bfloat16 on tensor cores (FlashAttention-2), forward and
// backward: bf16 q, k, v, out and gradients, float32 accumulation, float32 online-softmax statistics and lse.
// The math is fused_attention.cu's (S = s·Q·Kᵀ, P = exp(S − lse), Δ = rowsum(dO⊙O), dS = P(dP − Δ),
// dQ = s·dS·K, dK = s·dSᵀ·Q, dV = Pᵀ·dO); GQA: query head h reads kv head h / G.
//
// Every product is mma.sync m16n8k16 (kernels/cuda/mma.h: fragment layouts there), operands from shared
// tiles [rows][D + 8] bf16 (8 elements of padding: the 8 rows one ldmatrix matrix reads start 16 bytes
// apart modulo 128, so they hit distinct banks). A block is 4 warps; each warp owns 16 rows of the block's tile.
//
//   forward_kernel      grid (B·H, 64-row query tiles, the longest rows first). Per key tile of 64 (up to the
//                       causal limit): S = Q·Kᵀ (A: Q by ldmatrix, B: K by ldmatrix), masked only on tiles
//                       that cross the diagonal or the end of the keys; online softmax on the accumulator
//                       fragments (each row lives in the 4 lanes of a quad: max and sum by XOR 1, 2); P is
//                       rounded to bf16 A fragments in registers; O += P·V (B: V by ldmatrix.trans).
//                       Writes O / l (bf16) and lse = m + log l (float32).
//   delta_kernel        Δ = rowsum(dO⊙O) in float32 (a [B, H, T] scratch), one warp per row.
//   key_grad_kernel     grid (B·Hkv, 64-key tiles): for each query head of the group and each 32-query tile at or
//                       after the key tile: Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ, Pᵀ, dSᵀ in registers, dV += Pᵀ·dO and
//                       dK += dSᵀ·Q (B: dO, Q by ldmatrix.trans); dK, dV in registers, written once.
//   query_grad_kernel   grid (B·H, 64-row query tiles): per key tile up to the diagonal, S, dP = dO·Vᵀ, dS,
//                       dQ += dS·K (B: K by ldmatrix.trans); written once.
// dQ has its own kernel (recomputing S and dP) rather than float32 atomics from key_grad_kernel: deterministic
// (bitwise the same gradients every run, as the SIMT kernels), no [B, H, T, D] float32 scratch to zero and
// convert, and no atomic traffic; it costs one more Q·Kᵀ and dO·Vᵀ per tile pair.
#include "kernels/cuda/flash_attention_tc.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/bfloat16.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/mma.h"
#include "kernels/cuda/runtime.h"

#if defined(TAPEGRAD_CUDA_EMULATED)
#define FLASH_UNROLL
#else
#define FLASH_UNROLL _Pragma("unroll")
#endif

namespace tapegrad::kernels::cuda {
namespace {

using mma::ldmatrix_x4;
using mma::ldmatrix_x4_trans;
using mma::mma_bf16_16816;
using mma::pack_bf16x2;

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kTile = 64;       // query rows (forward, dQ) or keys (dK/dV) per block: 16 per warp
constexpr int kKeyTile = 64;    // keys per step of the forward and dQ kernels
constexpr int kQueryTile = 32;  // queries per step of the dK/dV kernel (fewer live accumulators)

// ---------------------------------------------------------------- settings
AttentionImpl impl_from_environment() {
  const char* env = std::getenv("TAPEGRAD_CUDA_ATTENTION");
  if (env == nullptr || *env == '\0' || std::strcmp(env, "tc") == 0) return AttentionImpl::TensorCore;
  if (std::strcmp(env, "simt") == 0) return AttentionImpl::Simt;
  throw Error(fmt::format("TAPEGRAD_CUDA_ATTENTION={}: expected tc or simt", env));
}
std::atomic<int>& impl_setting() {
  static std::atomic<int> impl{static_cast<int>(impl_from_environment())};
  return impl;
}

// ---------------------------------------------------------------- device helpers
template <class P>
struct Heads {  // one [B, heads, T, D] (or [B, heads, T]) view: element 0 and the strides of b, h, t
  P* base;
  int64_t sb, sh, st;
  __host__ __device__ P* at(int b, int h) const { return base + b * sb + h * sh; }
};
template <class P>
Heads<P> heads_of(const TensorView& v) {
  return {static_cast<P*>(v.data), v.strides[0], v.strides[1], v.strides[2]};
}

struct Dims {
  int T, D, H, Hkv, G;
  int Tk, off;  // keys per head; Tk − T (a KV cache, forward only)
};

__device__ inline int min_of(int a, int b) { return a < b ? a : b; }
__device__ inline float max_of(float a, float b) { return a > b ? a : b; }

// 8 bf16 (16 bytes) from global src (16-byte aligned) to shared dst (16-byte aligned), or zeros.
__device__ inline void copy8(bfloat16* dst, const bfloat16* src, bool valid) {
#if defined(TAPEGRAD_CUDA_EMULATED)
  for (int e = 0; e < 8; ++e) dst[e] = valid ? src[e] : bfloat16::from_bits(0);
#else
  *reinterpret_cast<uint4*>(dst) = valid ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#endif
}

// dst [ROWS][D + 8] = rows row0 .. row0 + ROWS − 1 of src (row stride ld), zero from row `rows` on.
template <int D, int ROWS>
__device__ inline void load_tile(bfloat16* dst, const bfloat16* src, int64_t ld, int row0, int rows) {
  constexpr int kChunks = D / 8, LD = D + 8;
  for (int idx = int(threadIdx.x); idx < ROWS * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks, t = row0 + r;
    copy8(dst + r * LD + 8 * c, src + int64_t(t < rows ? t : 0) * ld + 8 * c, t < rows);
  }
}

// acc[2·p + i] (i < 2) += A·B for the 16 rows `a_rows` of shared tile A (k = the D columns) and the 16 rows
// `b_rows` + 16p .. of shared tile Bt read as Bᵀ (S = A·Btᵀ: both operands row-major along k = D).
// NT: n-tiles of 8 (columns of the result = rows of Bt).
template <int D, int NT>
__device__ inline void product_abt(float (&acc)[NT][4], const bfloat16* A, int a_row0, const bfloat16* Bt,
                                   int b_row0) {
  constexpr int LD = D + 8;
  const int lane = int(threadIdx.x) % 32;
FLASH_UNROLL
  for (int ks = 0; ks < D / 16; ++ks) {
    uint32_t a[4];
    ldmatrix_x4(a, A + (a_row0 + lane % 16) * LD + ks * 16 + 8 * (lane / 16));
FLASH_UNROLL
    for (int p = 0; p < NT / 2; ++p) {
      uint32_t r[4];
      ldmatrix_x4(r, Bt + (b_row0 + 16 * p + lane % 8 + 8 * (lane / 16)) * LD + ks * 16 + 8 * ((lane / 8) % 2));
      const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      mma_bf16_16816(acc[2 * p], a, b0);
      mma_bf16_16816(acc[2 * p + 1], a, b1);
    }
  }
}

// acc [16 × D] (D/8 n-tiles) += W·M: W the 16 × (8·NT) accumulator fragments w (rounded to bf16 A fragments
// in registers), M rows m_row0 .. of shared tile M [keys][D] (B = M row-major: ldmatrix.trans).
template <int D, int NT>
__device__ inline void product_wm(float (&acc)[D / 8][4], const float (&w)[NT][4], const bfloat16* M, int m_row0) {
  constexpr int LD = D + 8;
  const int lane = int(threadIdx.x) % 32;
FLASH_UNROLL
  for (int kk = 0; kk < NT / 2; ++kk) {
    const uint32_t a[4] = {pack_bf16x2(w[2 * kk][0], w[2 * kk][1]), pack_bf16x2(w[2 * kk][2], w[2 * kk][3]),
                           pack_bf16x2(w[2 * kk + 1][0], w[2 * kk + 1][1]),
                           pack_bf16x2(w[2 * kk + 1][2], w[2 * kk + 1][3])};
FLASH_UNROLL
    for (int p = 0; p < D / 16; ++p) {
      uint32_t r[4];
      ldmatrix_x4_trans(r, M + (m_row0 + 16 * kk + lane % 8 + 8 * ((lane / 8) % 2)) * LD + 16 * p + 8 * (lane / 16));
      const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      mma_bf16_16816(acc[2 * p], a, b0);
      mma_bf16_16816(acc[2 * p + 1], a, b1);
    }
  }
}

template <int R, int C>
__device__ inline void zero(float (&a)[R][C]) {
FLASH_UNROLL
  for (int r = 0; r < R; ++r)
FLASH_UNROLL
    for (int c = 0; c < C; ++c) a[r][c] = 0.0f;
}

// Stores the warp's 16 × D accumulator (scaled by mult[half]: half 0 = row g, 1 = row g + 8) as bf16 rows
// row0 + g, row0 + g + 8 of dst (rows ≥ rows skipped).
template <int D>
__device__ inline void store_rows(bfloat16* dst, int64_t ld, const float (&acc)[D / 8][4], int row0, int rows,
                                  const float (&mult)[2]) {
  const int lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
FLASH_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + g + 8 * half;
    if (row >= rows) continue;
    bfloat16* out = dst + int64_t(row) * ld;
FLASH_UNROLL
    for (int nt = 0; nt < D / 8; ++nt) {
      out[8 * nt + 2 * t] = bfloat16(acc[nt][2 * half] * mult[half]);
      out[8 * nt + 2 * t + 1] = bfloat16(acc[nt][2 * half + 1] * mult[half]);
    }
  }
}

// ---------------------------------------------------------------- forward
template <int D>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(Heads<bfloat16> out, Heads<float> lse, Heads<const bfloat16> q, Heads<const bfloat16> k,
                   Heads<const bfloat16> v, Dims n, float scale) {
  constexpr int LD = D + 8, NT = kKeyTile / 8;
  TG_DYNAMIC_SHARED(bfloat16, smem);
  bfloat16* Qs = smem;             // [64][LD]
  bfloat16* Ks = Qs + kTile * LD;  // [64][LD]
  bfloat16* Vs = Ks + kTile * LD;  // [64][LD]
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int b = int(blockIdx.x) / n.H, h = int(blockIdx.x) % n.H, kv = h / n.G;
  const int row0 = (int(gridDim.y) - 1 - int(blockIdx.y)) * kTile;
  const int key_end = min_of(n.Tk, row0 + kTile + n.off);  // keys ≤ the block's last row
  load_tile<D, kTile>(Qs, q.at(b, h), q.st, row0, n.T);

  const int rows[2] = {row0 + 16 * warp + g, row0 + 16 * warp + g + 8};
  float o[D / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  zero(o);
  for (int k0 = 0; k0 < key_end; k0 += kKeyTile) {
    __syncthreads();  // the previous tile's readers are done (and Qs is complete)
    load_tile<D, kKeyTile>(Ks, k.at(b, kv), k.st, k0, n.Tk);
    load_tile<D, kKeyTile>(Vs, v.at(b, kv), v.st, k0, n.Tk);
    __syncthreads();
    float s[NT][4];
    zero(s);
    product_abt<D, NT>(s, Qs, 16 * warp, Ks, 0);
    // only a tile crossing the diagonal (or the end of the keys) has hidden keys
    const bool masked = k0 + kKeyTile - 1 > row0 + n.off || k0 + kKeyTile > n.Tk;
FLASH_UNROLL
    for (int half = 0; half < 2; ++half) {
      float tile_max = -INFINITY;
FLASH_UNROLL
      for (int nt = 0; nt < NT; ++nt)
FLASH_UNROLL
        for (int e = 0; e < 2; ++e) {
          const int j = k0 + 8 * nt + 2 * t + e;
          float& x = s[nt][2 * half + e];
          x = !masked || (j <= rows[half] + n.off && j < n.Tk) ? scale * x : -INFINITY;
          tile_max = max_of(tile_max, x);
        }
      tile_max = max_of(tile_max, TG_SHFL_XOR(tile_max, 1));  // the row's 4 lanes (a quad)
      tile_max = max_of(tile_max, TG_SHFL_XOR(tile_max, 2));
      const float m_new = max_of(m[half], tile_max);
      const float m_ref = m_new == -INFINITY ? 0.0f : m_new;  // a row that has seen no key yet
      const float rescale = expf(m[half] - m_ref);
      m[half] = m_new;
      float p_sum = 0.0f;
FLASH_UNROLL
      for (int nt = 0; nt < NT; ++nt)
FLASH_UNROLL
        for (int e = 0; e < 2; ++e) {
          float& x = s[nt][2 * half + e];
          x = expf(x - m_ref);
          p_sum += x;
        }
      l[half] = l[half] * rescale + p_sum;  // this lane's part of the row sum
FLASH_UNROLL
      for (int nt = 0; nt < D / 8; ++nt) o[nt][2 * half] *= rescale, o[nt][2 * half + 1] *= rescale;
    }
    product_wm<D, NT>(o, s, Vs, 0);
  }

  float inv[2];
FLASH_UNROLL
  for (int half = 0; half < 2; ++half) {
    float sum = l[half];
    sum += TG_SHFL_XOR(sum, 1);
    sum += TG_SHFL_XOR(sum, 2);
    inv[half] = 1.0f / sum;
    if (t == 0 && rows[half] < n.T) lse.at(b, h)[int64_t(rows[half]) * lse.st] = m[half] + logf(sum);
  }
  store_rows<D>(out.at(b, h), out.st, o, row0 + 16 * warp, n.T, inv);
}

// ---------------------------------------------------------------- backward
// delta[(b·H + h)·T + t] = Σ_d dO·O in float32; one warp per row.
__global__ void __launch_bounds__(kThreads)
    delta_kernel(float* delta, Heads<const bfloat16> grad_out, Heads<const bfloat16> out, int B, Dims n) {
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int64_t rows = int64_t(B) * n.H * n.T;
  // every warp of the block runs the same number of iterations (shuffles are block-wide in emulation)
  for (int64_t first = int64_t(blockIdx.x) * kWarps; first < rows; first += int64_t(gridDim.x) * kWarps) {
    const int64_t row = first + warp;
    float dot = 0.0f;
    if (row < rows) {
      const int t = int(row % n.T);
      const int64_t bh = row / n.T;
      const int b = int(bh / n.H), h = int(bh % n.H);
      const bfloat16* gr = grad_out.at(b, h) + t * grad_out.st;
      const bfloat16* o = out.at(b, h) + t * out.st;
      for (int d = lane; d < n.D; d += 32) dot += float(gr[d]) * float(o[d]);
    }
    dot = warp_sum(dot);
    if (row < rows && lane == 0) delta[row] = dot;
  }
}

// dK, dV of one tile of 64 keys (rows = keys, 16 per warp; columns = queries).
template <int D>
__global__ void __launch_bounds__(kThreads)
    key_grad_kernel(Heads<bfloat16> grad_k, Heads<bfloat16> grad_v, Heads<const bfloat16> grad_out,
                    Heads<const bfloat16> q, Heads<const bfloat16> k, Heads<const bfloat16> v, Heads<const float> lse,
                    const float* delta, Dims n, float scale) {
  constexpr int LD = D + 8, NT = kQueryTile / 8;
  TG_DYNAMIC_SHARED(bfloat16, smem);
  bfloat16* Ks = smem;                     // [64][LD]
  bfloat16* Vs = Ks + kTile * LD;          // [64][LD]
  bfloat16* Qs = Vs + kTile * LD;          // [32][LD]
  bfloat16* dOs = Qs + kQueryTile * LD;    // [32][LD]
  float* lse_s = reinterpret_cast<float*>(dOs + kQueryTile * LD);  // [32]
  float* delta_s = lse_s + kQueryTile;                              // [32]
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int b = int(blockIdx.x) / n.Hkv, kv = int(blockIdx.x) % n.Hkv;
  const int key0 = int(blockIdx.y) * kTile;
  load_tile<D, kTile>(Ks, k.at(b, kv), k.st, key0, n.T);
  load_tile<D, kTile>(Vs, v.at(b, kv), v.st, key0, n.T);
  const int keys[2] = {key0 + 16 * warp + g, key0 + 16 * warp + g + 8};

  float dk[D / 8][4], dv[D / 8][4];
  zero(dk);
  zero(dv);
  for (int gi = 0; gi < n.G; ++gi) {
    const int h = kv * n.G + gi;
    const float* lh = lse.at(b, h);
    const float* delta_h = delta + (int64_t(b) * n.H + h) * n.T;
    for (int q0 = key0; q0 < n.T; q0 += kQueryTile) {  // query tiles that see a key of this tile
      __syncthreads();  // the previous tile's readers are done (and Ks, Vs are complete)
      load_tile<D, kQueryTile>(Qs, q.at(b, h), q.st, q0, n.T);
      load_tile<D, kQueryTile>(dOs, grad_out.at(b, h), grad_out.st, q0, n.T);
      for (int i = int(threadIdx.x); i < kQueryTile; i += kThreads) {
        const int tq = q0 + i;
        lse_s[i] = tq < n.T ? lh[int64_t(tq) * lse.st] : 0.0f;
        delta_s[i] = tq < n.T ? delta_h[tq] : 0.0f;
      }
      __syncthreads();
      float s[NT][4], dp[NT][4];  // Sᵀ and dPᵀ: rows = this warp's keys, columns = the tile's queries
      zero(s);
      zero(dp);
      product_abt<D, NT>(s, Ks, 16 * warp, Qs, 0);
      product_abt<D, NT>(dp, Vs, 16 * warp, dOs, 0);
FLASH_UNROLL
      for (int nt = 0; nt < NT; ++nt)
FLASH_UNROLL
        for (int i = 0; i < 4; ++i) {
          const int col = 8 * nt + 2 * t + i % 2, tq = q0 + col, j = keys[i / 2];
          // Pᵀ = exp(s·Sᵀ − lse) where key j ≤ query tq < T, else 0; dSᵀ = Pᵀ (dPᵀ − Δ)
          const float p = j <= tq && tq < n.T ? expf(scale * s[nt][i] - lse_s[col]) : 0.0f;
          s[nt][i] = p;
          dp[nt][i] = p * (dp[nt][i] - delta_s[col]);
        }
      product_wm<D, NT>(dv, s, dOs, 0);
      product_wm<D, NT>(dk, dp, Qs, 0);
    }
  }
  const float mult_k[2] = {scale, scale}, mult_v[2] = {1.0f, 1.0f};
  store_rows<D>(grad_k.at(b, kv), grad_k.st, dk, key0 + 16 * warp, n.T, mult_k);
  store_rows<D>(grad_v.at(b, kv), grad_v.st, dv, key0 + 16 * warp, n.T, mult_v);
}

// dQ of one tile of 64 query rows (16 per warp): per key tile up to the diagonal, dQ += dS·K.
template <int D>
__global__ void __launch_bounds__(kThreads)
    query_grad_kernel(Heads<bfloat16> grad_q, Heads<const bfloat16> grad_out, Heads<const bfloat16> q,
                      Heads<const bfloat16> k, Heads<const bfloat16> v, Heads<const float> lse, const float* delta,
                      Dims n, float scale) {
  constexpr int LD = D + 8, NT = kKeyTile / 8;
  TG_DYNAMIC_SHARED(bfloat16, smem);
  bfloat16* Qs = smem;               // [64][LD]
  bfloat16* dOs = Qs + kTile * LD;   // [64][LD]
  bfloat16* Ks = dOs + kTile * LD;   // [64][LD]
  bfloat16* Vs = Ks + kKeyTile * LD;  // [64][LD]
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int b = int(blockIdx.x) / n.H, h = int(blockIdx.x) % n.H, kv = h / n.G;
  const int row0 = (int(gridDim.y) - 1 - int(blockIdx.y)) * kTile;
  const int key_end = min_of(n.T, row0 + kTile);
  load_tile<D, kTile>(Qs, q.at(b, h), q.st, row0, n.T);
  load_tile<D, kTile>(dOs, grad_out.at(b, h), grad_out.st, row0, n.T);
  const int rows[2] = {row0 + 16 * warp + g, row0 + 16 * warp + g + 8};
  float row_lse[2], row_delta[2];
FLASH_UNROLL
  for (int half = 0; half < 2; ++half) {
    const bool valid = rows[half] < n.T;
    row_lse[half] = valid ? lse.at(b, h)[int64_t(rows[half]) * lse.st] : 0.0f;
    row_delta[half] = valid ? delta[(int64_t(b) * n.H + h) * n.T + rows[half]] : 0.0f;
  }

  float dq[D / 8][4];
  zero(dq);
  for (int k0 = 0; k0 < key_end; k0 += kKeyTile) {
    __syncthreads();  // the previous tile's readers are done (and Qs, dOs are complete)
    load_tile<D, kKeyTile>(Ks, k.at(b, kv), k.st, k0, n.T);
    load_tile<D, kKeyTile>(Vs, v.at(b, kv), v.st, k0, n.T);
    __syncthreads();
    float s[NT][4], dp[NT][4];
    zero(s);
    zero(dp);
    product_abt<D, NT>(s, Qs, 16 * warp, Ks, 0);
    product_abt<D, NT>(dp, dOs, 16 * warp, Vs, 0);
FLASH_UNROLL
    for (int nt = 0; nt < NT; ++nt)
FLASH_UNROLL
      for (int i = 0; i < 4; ++i) {
        const int j = k0 + 8 * nt + 2 * t + i % 2, half = i / 2;
        // dS = P (dP − Δ), P = exp(s·S − lse) where key j ≤ row t < T, else 0
        const float p = j <= rows[half] && rows[half] < n.T ? expf(scale * s[nt][i] - row_lse[half]) : 0.0f;
        dp[nt][i] = p * (dp[nt][i] - row_delta[half]);
      }
    product_wm<D, NT>(dq, dp, Ks, 0);
  }
  const float mult[2] = {scale, scale};
  store_rows<D>(grad_q.at(b, h), grad_q.st, dq, row0 + 16 * warp, n.T, mult);
}

// ---------------------------------------------------------------- host side
unsigned tiles(int T, int rows_per_tile) { return unsigned((T + rows_per_tile - 1) / rows_per_tile); }

Dims dims_of(const TensorView& q, const TensorView& k) {
  return {int(q.shape[2]), int(q.shape[3]), int(q.shape[1]), int(k.shape[1]), int(q.shape[1] / k.shape[1]),
          int(k.shape[2]), int(k.shape[2] - q.shape[2])};
}

// 16-byte loads of whole rows: the data 16-byte aligned, every stride a multiple of 8 elements.
bool rows_loadable(const TensorView& x) {
  if (reinterpret_cast<uintptr_t>(x.data) % 16 != 0) return false;
  for (int d = 0; d < 3; ++d)
    if (x.shape[d] > 1 && x.strides[d] % 8 != 0) return false;
  return true;
}

// Tensor cores with bf16 mma: compute capability 8.0 or later (always, on the emulated device).
bool device_has_bf16_mma() {
#if defined(TAPEGRAD_CUDA_EMULATED)
  return true;
#else
  static const bool has = [] {
    int device = 0, major = 0;
    check(cudaGetDevice(&device), "causal_attention: cudaGetDevice");
    check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
          "causal_attention: cudaDeviceGetAttribute");
    return major >= 8;
  }();
  return has;
#endif
}

bool takes_common(const TensorView& q, const TensorView& k, const TensorView& v) {
  const int64_t D = q.shape[3];
  return attention_impl() == AttentionImpl::TensorCore && q.dtype == DType::BFloat16 &&
         (D == 32 || D == 64 || D == 128) && rows_loadable(q) && rows_loadable(k) && rows_loadable(v) &&
         device_has_bf16_mma();
}

// Calls f(std::integral_constant<int, D>) for D = 32, 64 or 128.
template <class F>
void with_head_dim(int D, F&& f) {
  if (D == 32) return f(std::integral_constant<int, 32>{});
  if (D == 64) return f(std::integral_constant<int, 64>{});
  return f(std::integral_constant<int, 128>{});
}

constexpr size_t tile_bytes(int D, int rows) { return sizeof(bfloat16) * size_t(rows) * size_t(D + 8); }

}  // namespace

void set_attention_impl(AttentionImpl impl) { impl_setting().store(static_cast<int>(impl)); }
AttentionImpl attention_impl() { return static_cast<AttentionImpl>(impl_setting().load()); }

bool flash_tc_takes_forward(const TensorView& q, const TensorView& k, const TensorView& v) {
  const bool decoding = k.shape[2] > q.shape[2] && q.shape[2] < 16;
  return !decoding && takes_common(q, k, v);
}

bool flash_tc_takes_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                             const TensorView& grad_out, const TensorView& out) {
  return takes_common(q, k, v) && rows_loadable(grad_out) && rows_loadable(out);
}

void flash_tc_forward(const TensorView& out, const TensorView& lse, const TensorView& q, const TensorView& k,
                      const TensorView& v, double scale) {
  const Dims n = dims_of(q, k);
  const unsigned heads = unsigned(q.shape[0] * n.H);
  with_head_dim(n.D, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    const size_t bytes = 3 * tile_bytes(D, kTile);
    auto* kernel = &forward_kernel<D>;
    allow_kernel_shared_bytes(reinterpret_cast<const void*>(kernel), bytes);
    launch(kernel, dim3(heads, tiles(n.T, kTile)), dim3(kThreads), bytes, heads_of<bfloat16>(out),
           heads_of<float>(lse), heads_of<const bfloat16>(q), heads_of<const bfloat16>(k),
           heads_of<const bfloat16>(v), n, float(scale));
  });
}

void flash_tc_backward(CudaBackend& backend, const TensorView& grad_q, const TensorView& grad_k,
                       const TensorView& grad_v, const TensorView& grad_out, const TensorView& q, const TensorView& k,
                       const TensorView& v, const TensorView& out, const TensorView& lse, double scale) {
  const Dims n = dims_of(q, k);
  const int B = int(q.shape[0]);
  const int64_t rows = int64_t(B) * n.H * n.T;
  // Δ [B, H, T] float32 from the caching allocator (freed after the launches: stream order)
  const ScratchBuffer buffer(backend, sizeof(float) * size_t(rows));
  launch(&delta_kernel, dim3(blocks_for(rows, kWarps)), dim3(kThreads), 0, buffer.as<float>(),
         heads_of<const bfloat16>(grad_out), heads_of<const bfloat16>(out), B, n);
  const float* delta = buffer.as<const float>();
  const float s = float(scale);
  with_head_dim(n.D, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    const size_t key_bytes = 2 * tile_bytes(D, kTile) + 2 * tile_bytes(D, kQueryTile) + 2 * kQueryTile * sizeof(float);
    auto* key_kernel = &key_grad_kernel<D>;
    allow_kernel_shared_bytes(reinterpret_cast<const void*>(key_kernel), key_bytes);
    launch(key_kernel, dim3(unsigned(B * n.Hkv), tiles(n.T, kTile)), dim3(kThreads), key_bytes,
           heads_of<bfloat16>(grad_k), heads_of<bfloat16>(grad_v), heads_of<const bfloat16>(grad_out),
           heads_of<const bfloat16>(q), heads_of<const bfloat16>(k), heads_of<const bfloat16>(v),
           heads_of<const float>(lse), delta, n, s);
    const size_t query_bytes = 4 * tile_bytes(D, kTile);
    auto* query_kernel = &query_grad_kernel<D>;
    allow_kernel_shared_bytes(reinterpret_cast<const void*>(query_kernel), query_bytes);
    launch(query_kernel, dim3(unsigned(B * n.H), tiles(n.T, kTile)), dim3(kThreads), query_bytes,
           heads_of<bfloat16>(grad_q), heads_of<const bfloat16>(grad_out), heads_of<const bfloat16>(q),
           heads_of<const bfloat16>(k), heads_of<const bfloat16>(v), heads_of<const float>(lse), delta, n, s);
  });
}

}  // namespace tapegrad::kernels::cuda
