// row_group.h — helpers of the row-wise fused kernels (cross-entropy, RMSNorm): the threads that
// share one row, and a temporary device buffer.
//
// RowGroup<WarpRows> is the group of threads that processes one row of a matrix:
//   WarpRows = false: the whole block (long rows), one row per block at a time;
//   WarpRows = true:  one warp (short rows), blockDim.x / 32 rows per block at a time.
// A kernel walks the rows with for_each_row-style loops whose trip count is the same for every
// thread of the block (inactive groups still take part), so the group reductions — warp_sum or
// block_sum — are reached by all threads, as runtime.h requires.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"  // ScratchBuffer
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {

template <bool WarpRows>
struct RowGroup {
  // Threads per row, this thread's rank among them, rows per block, and this group's row slot.
  __device__ int size() const { return WarpRows ? 32 : static_cast<int>(blockDim.x); }
  __device__ int rank() const { return WarpRows ? static_cast<int>(threadIdx.x % 32) : static_cast<int>(threadIdx.x); }
  __device__ int rows_per_block() const { return WarpRows ? static_cast<int>(blockDim.x / 32) : 1; }
  __device__ int slot() const { return WarpRows ? static_cast<int>(threadIdx.x / 32) : 0; }
  // First row of this block in the grid-stride walk, and the stride of that walk.
  __device__ int64_t first_row() const { return int64_t(blockIdx.x) * rows_per_block(); }
  __device__ int64_t row_step() const { return int64_t(gridDim.x) * rows_per_block(); }

  // Sum / max over the group; every thread of the group gets the result. scratch: __shared__ T[32].
  template <class T>
  __device__ T sum(T v, T* scratch) const {
    if constexpr (WarpRows) {
      (void)scratch;
      return warp_sum(v);
    } else {
      return block_sum(v, scratch);
    }
  }
  template <class T>
  __device__ T max(T v, T* scratch, T lowest) const {
    if constexpr (WarpRows) {
      (void)scratch;
      (void)lowest;
      return warp_max(v);
    } else {
      return block_max(v, scratch, lowest);
    }
  }
};

// Blocks for `rows` rows at `rows_per_block` rows per block (the kernels loop over the rest).
inline unsigned row_blocks(int64_t rows, int rows_per_block) { return blocks_for(rows, rows_per_block, 65535); }

// Threads per block for a row of n elements handled by one block: n rounded up to a multiple of
// 32, between 32 and max_threads.
inline int threads_for_row(int64_t n, int max_threads) {
  const int64_t t = (n + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : (t > max_threads ? max_threads : t));
}

}  // namespace tapegrad::kernels::cuda
