// multi_tensor.h — the chunk table shared by the multi-tensor kernels (fused_adamw.cu, clip_grad_norm.cu): one
// launch over many tensors, each cut into chunks of kMultiTensorChunk elements, one block per chunk. The host
// builds a table of slots (one per tensor: its pointers, its element count n and the index of its first chunk;
// earlier tensors' chunks come first) and copies it to the device; block b finds its slot by binary search.
#pragma once
#include <cstdint>

#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {

constexpr int64_t kMultiTensorChunk = 16384;  // elements per block: 64 per thread of a 256-thread block

// How many chunks n elements take.
inline int64_t multi_tensor_chunks(int64_t n) { return (n + kMultiTensorChunk - 1) / kMultiTensorChunk; }

// The slot whose chunks include `chunk`: the last one whose first_chunk is ≤ it (Slot has a field first_chunk;
// slots[0].first_chunk == 0 and first_chunk ascends).
template <class Slot>
__device__ inline const Slot& slot_of_chunk(const Slot* slots, int n_slots, int64_t chunk) {
  int lo = 0, hi = n_slots - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (slots[mid].first_chunk <= chunk)
      lo = mid;
    else
      hi = mid - 1;
  }
  return slots[lo];
}

}  // namespace tapegrad::kernels::cuda
