// rows.h — helpers of the row-wise CUDA kernels (reduce.cu, softmax.cu) and of strided addressing.
//
// A "row" is the set of elements one result depends on: the reduced slice of one output
// (reduce, max_along) or all elements along `dim` (softmax). A block of kRowThreads threads
// handles `rows` rows at once with `lanes` threads per row (both powers of two, rows·lanes = 256):
//   * rows laid out contiguously (the row dim is the fastest-moving one): the lanes of a row are
//     adjacent threads, so a warp reads consecutive elements of one row (or of a few short rows);
//   * strided rows (e.g. a reduction over the batch dim of [N, C]): adjacent threads take adjacent
//     rows, which are adjacent in memory, and the lanes split the row's length.
// Either way the reads of a warp are coalesced. A row's lanes combine their partial results with
// group_reduce: a tree in shared memory (log2(lanes) barriers, reached by every thread of the block).
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/indexer.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {

inline constexpr int kRowThreads = 256;

// How the 256 threads of a block split into rows × lanes.
struct RowMap {
  int lanes = 1;            // threads per row
  int rows = kRowThreads;   // rows per block
  bool lanes_adjacent = true;  // adjacent threads are lanes of one row (else: the same lane of adjacent rows)

  __host__ __device__ int row_of(int thread) const { return lanes_adjacent ? thread / lanes : thread % rows; }
  __host__ __device__ int lane_of(int thread) const { return lanes_adjacent ? thread % lanes : thread / rows; }
  // The thread (and shared-memory slot) of a row's lane: slot(row_of(t), lane_of(t)) == t.
  __host__ __device__ int slot(int row, int lane) const { return lanes_adjacent ? row * lanes + lane : lane * rows + row; }
};

// The smallest power of two ≥ n, capped at cap (a power of two).
inline int pow2_at_least(int64_t n, int cap) {
  int p = 1;
  while (p < cap && p < n) p *= 2;
  return p;
}

// n_rows rows of row_len elements; rows_contiguous: a row's elements are the fastest-moving in memory.
inline RowMap plan_rows(int64_t n_rows, int64_t row_len, bool rows_contiguous) {
  RowMap m;
  m.lanes_adjacent = rows_contiguous;
  if (rows_contiguous) {
    m.lanes = pow2_at_least(row_len, kRowThreads);  // up to the whole block on one row
  } else {
    // a warp's worth of adjacent rows (fewer when there are fewer rows), lanes for the rest
    m.lanes = std::min(kRowThreads / pow2_at_least(n_rows, 32), pow2_at_least(row_len, kRowThreads));
  }
  m.rows = kRowThreads / m.lanes;
  return m;
}

// Combines v over the lanes of each row with Op::combine(a, b); every thread gets its row's result.
// scratch: kRowThreads slots of shared memory. Called by every thread of the block (barriers).
template <class Op, class Acc>
__device__ inline Acc group_reduce(Acc v, Acc* scratch, const RowMap& map) {
  const int t = threadIdx.x, row = map.row_of(t), lane = map.lane_of(t);
  scratch[t] = v;
  __syncthreads();
  for (int s = map.lanes / 2; s > 0; s /= 2) {
    if (lane < s) scratch[t] = Op::combine(scratch[t], scratch[map.slot(row, lane + s)]);
    __syncthreads();
  }
  const Acc total = scratch[map.slot(row, 0)];
  __syncthreads();  // scratch is free again
  return total;
}

// Element offsets of linear index i in each operand of ix. `narrow` (the index space has < 2³²
// elements): 32-bit coordinates, since 64-bit division is a long software sequence on the GPU.
template <int N>
__device__ inline void element_offsets(const Indexer<N>& ix, int64_t i, bool narrow, int64_t (&off)[N]) {
  if (ix.ndim <= 1) {  // one merged dim: no division at all
    for (int k = 0; k < N; ++k) off[k] = ix.ndim == 1 ? i * ix.strides[k][0] : 0;
    return;
  }
  if (!narrow) return ix.offsets(i, off);
  for (int k = 0; k < N; ++k) off[k] = 0;
  uint32_t rest = static_cast<uint32_t>(i);
  for (int d = ix.ndim - 1; d >= 0; --d) {
    const uint32_t size = static_cast<uint32_t>(ix.shape[d]);
    const uint32_t c = rest % size;
    rest /= size;
    for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(c) * ix.strides[k][d];
  }
}

// True when every index below n fits the 32-bit path of element_offsets.
__host__ __device__ inline bool narrow_index(int64_t n) { return n <= int64_t{UINT32_MAX}; }

}  // namespace tapegrad::kernels::cuda
