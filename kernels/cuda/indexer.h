// indexer.h — strided addressing inside CUDA kernels: a TensorView flattened into a small POD
// that is passed to a kernel by value (a kernel parameter; no device allocation per launch).
//
// Indexer<N> holds one shape (the output's; inputs are already broadcast to it with stride 0)
// and N stride sets (in elements). offsets(i) turns the row-major linear index i of the output
// into each operand's element offset: one div/mod per dimension, innermost first.
#pragma once
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {

template <int N>
struct Indexer {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  // Element offsets of linear index i in each of the N operands.
  __host__ __device__ inline void offsets(int64_t i, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t size = shape[d];
      const int64_t c = i % size;
      i /= size;
      for (int k = 0; k < N; ++k) off[k] += c * strides[k][d];
    }
  }
};

// An Indexer over shape with the strides of each view (all views have shape's ndim). Size-1 dims
// are dropped and adjacent dims that are contiguous in every operand merged, so a contiguous
// tensor costs one div/mod per element.
template <int N>
Indexer<N> make_indexer(const Shape& shape, const TensorView* const (&views)[N]) {
  Indexer<N> ix;
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (ix.ndim > 0) {
      bool mergeable = true;
      const int p = ix.ndim - 1;
      for (int k = 0; k < N; ++k) mergeable &= views[k]->strides[d] * shape[d] == ix.strides[k][p];
      if (mergeable) {
        ix.shape[p] *= shape[d];
        for (int k = 0; k < N; ++k) ix.strides[k][p] = views[k]->strides[d];
        continue;
      }
    }
    ix.shape[ix.ndim] = shape[d];
    for (int k = 0; k < N; ++k) ix.strides[k][ix.ndim] = views[k]->strides[d];
    ++ix.ndim;
  }
  return ix;
}

}  // namespace tapegrad::kernels::cuda
