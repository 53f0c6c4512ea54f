// mma.h — the two warp-level tensor-core instructions the bf16 flash attention is built on, as inline PTX
// under nvcc (sm_80+) and as an emulation with exactly the same fragment semantics in the emulated build:
//
//   mma_bf16_16816(d, a, b)   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32:  D[16×8] += A[16×16]·B[16×8]
//                             (bf16 inputs, float32 accumulation)
//   ldmatrix_x4(r, p)         ldmatrix.sync.aligned.m8n8.x4.shared.b16:        four 8×8 b16 matrices from shared memory
//   ldmatrix_x4_trans(r, p)   ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16:  the same, each matrix transposed
//
// Every call is warp-collective: all 32 lanes of the warp call it together (and, in the emulated build, every
// thread of the block — see below). Registers are 32-bit words holding two bf16 values, the element with the
// lower column (or k) index in the LOW 16 bits (pack_bf16x2).
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16 with floating point type" and "ldmatrix"),
// with g = lane / 4 (groupID) and t = lane % 4 (threadID_in_group):
//   A (16×16, row-major "row"), 4 words a[0..3]:
//     a[0] = A[g    ][2t, 2t+1]      a[1] = A[g + 8][2t, 2t+1]
//     a[2] = A[g    ][2t+8, 2t+9]    a[3] = A[g + 8][2t+8, 2t+9]
//   B (16×8, "col": B[k][n] with k the reduction index), 2 words b[0..1]:
//     b[0] = B[2t, 2t+1][g]          b[1] = B[2t+8, 2t+9][g]
//   C / D (16×8 float32), 4 floats d[0..3]:
//     d[0], d[1] = D[g][2t], D[g][2t+1]      d[2], d[3] = D[g + 8][2t], D[g + 8][2t+1]
//   ldmatrix .x4: lanes 8i .. 8i+7 give the addresses of rows 0..7 of matrix i (each row 8 contiguous b16 =
//   16 bytes, 16-byte aligned, in shared memory); word r[i] of lane ℓ then holds matrix i's
//     M_i[g][2t, 2t+1]                 (no .trans)
//     M_i[2t][g], M_i[2t+1][g]         (.trans: the matrix is transposed on the way)
// So an A fragment of a row-major [16][16] tile X is ldmatrix_x4 with lane ℓ pointing at
// X[ℓ % 16][8·(ℓ / 16)]; a B fragment of Bᵀ stored row-major (K as [n][k]: S = Q·Kᵀ) is ldmatrix_x4 over
// K[n0 + ℓ % 8][8·(ℓ / 8)], giving b for n-tile n0 (r[0], r[1]) — x4 with two n-tiles at once is what the
// kernels use; a B fragment of B stored row-major ([k][n]: O += P·V) is ldmatrix_x4_trans over V[k rows][n].
// A float32 accumulator D (16×8 tiles, two side by side along k) becomes the A fragment of the next product
// in registers: a[0] = pack(d_left[0], d_left[1]), a[1] = pack(d_left[2], d_left[3]), a[2], a[3] = the same of
// d_right (the FlashAttention-2 trick: P never goes through shared memory).
//
// Emulated build (HIP-CPU): a block's threads are fibers on one host thread, and `__shared__` is thread_local
// there, so the emulation all-gathers a warp's registers through a per-block exchange array and two
// __syncthreads (every thread of the block must make the same calls, as for HIP-CPU's shuffles — the kernels
// call these uniformly), then each lane computes exactly its own fragment per the layouts above. (Gathering
// by XOR shuffles, masks 1..31, would be the same semantics at 31 barriers per word instead of 2.)
#pragma once
#include <cstdint>

#include "kernels/bfloat16.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda::mma {

// Two bf16 values (lo: lower index) in one 32-bit word, each rounded to nearest even.
__device__ inline uint32_t pack_bf16x2(float lo, float hi) {
  return uint32_t(float_to_bfloat16_bits(lo)) | (uint32_t(float_to_bfloat16_bits(hi)) << 16);
}
__device__ inline float low_bf16(uint32_t w) { return bfloat16_bits_to_float(uint16_t(w & 0xFFFFu)); }
__device__ inline float high_bf16(uint32_t w) { return bfloat16_bits_to_float(uint16_t(w >> 16)); }

#if defined(TAPEGRAD_CUDA_EMULATED)

namespace emulated {
constexpr int kMaxThreads = 1024;
struct Exchange {
  uint32_t words[kMaxThreads][6];
  const uint16_t* rows[kMaxThreads];
};
inline Exchange& exchange() {
  static __shared__ Exchange x;  // thread_local under HIP-CPU: one per block being run
  return x;
}
// The bf16 bits of element `half` (0: low, 1: high) of word `reg` of lane `lane` of this warp.
inline float element(const Exchange& x, int warp_base, int lane, int reg, int half) {
  const uint32_t w = x.words[warp_base + lane][reg];
  return half == 0 ? low_bf16(w) : high_bf16(w);
}
}  // namespace emulated

__device__ inline void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  emulated::Exchange& x = emulated::exchange();
  const int tid = int(threadIdx.x), base = tid & ~31, lane = tid & 31, g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) x.words[tid][i] = a[i];
  for (int i = 0; i < 2; ++i) x.words[tid][4 + i] = b[i];
  __syncthreads();
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
    float sum = 0.0f;
    for (int k = 0; k < 16; ++k) {
      // A[row][k]: lane (row % 8)·4 + (k % 8) / 2, word (row ≥ 8) + 2·(k ≥ 8), half k % 2
      const float av = emulated::element(x, base, (row % 8) * 4 + (k % 8) / 2, row / 8 + 2 * (k / 8), k % 2);
      // B[k][col]: lane col·4 + (k % 8) / 2, word (k ≥ 8), half k % 2
      const float bv = emulated::element(x, base, col * 4 + (k % 8) / 2, k / 8 + 4, k % 2);
      sum += av * bv;  // exact: a product of two bf16 fits a float32
    }
    d[i] += sum;
  }
  __syncthreads();
}

template <bool Trans>
__device__ inline void ldmatrix_x4_impl(uint32_t (&r)[4], const bfloat16* row) {
  emulated::Exchange& x = emulated::exchange();
  const int tid = int(threadIdx.x), base = tid & ~31, lane = tid & 31, g = lane / 4, t = lane % 4;
  x.rows[tid] = &row->bits;
  __syncthreads();
  for (int i = 0; i < 4; ++i) {
    uint16_t lo, hi;
    if (Trans) {
      lo = x.rows[base + 8 * i + 2 * t][g];
      hi = x.rows[base + 8 * i + 2 * t + 1][g];
    } else {
      lo = x.rows[base + 8 * i + g][2 * t];
      hi = x.rows[base + 8 * i + g][2 * t + 1];
    }
    r[i] = uint32_t(lo) | (uint32_t(hi) << 16);
  }
  __syncthreads();
}
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const bfloat16* row) { ldmatrix_x4_impl<false>(r, row); }
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const bfloat16* row) { ldmatrix_x4_impl<true>(r, row); }

#else  // nvcc

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define TG_MMA_UNSUPPORTED 1  // bf16 mma.sync needs sm_80; the host never dispatches here on older GPUs
#endif

__device__ inline void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(TG_MMA_UNSUPPORTED)
  (void)d, (void)a, (void)b;
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const bfloat16* row) {
#if defined(TG_MMA_UNSUPPORTED)
  (void)r, (void)row;
  __trap();
#else
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const bfloat16* row) {
#if defined(TG_MMA_UNSUPPORTED)
  (void)r, (void)row;
  __trap();
#else
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

#endif

}  // namespace tapegrad::kernels::cuda::mma
