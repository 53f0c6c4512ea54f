// index_args.h — what the CUDA indexing kernels share (index.cu: index_select / gather; index_add.cu:
// the deterministic index_add / scatter_add; index_copy.cu): the grid-stride loop, the split of a tensor
// at one dim, the index argument of a kernel with its bounds check, and the host-side checks and dtype
// dispatch.
//
// Only included by kernels/cuda/*.cu.
#pragma once
#include <cstdint>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/indexer.h"
#include "kernels/cuda/runtime.h"

// for (int64_t i = …; i < n; …): a grid-stride loop over n items (any grid size covers them all).
#define TG_GRID_STRIDE(i, n)                                                                          \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);               \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

namespace tapegrad::kernels::cuda::index_detail {

// Splits the row-major linear index of a shape [outer..., size, inner...] into the coordinate j
// along `dim` and the element offsets of every operand for the other coordinates (the operands
// share the outer and inner dims; only their extent along `dim` may differ).
template <int N>
struct DimSplit {
  Indexer<N> outer, inner;
  int64_t size = 1, inner_numel = 1;

  __host__ __device__ inline void split(int64_t i, int64_t& j, int64_t (&off)[N]) const {
    const int64_t rest = i / inner_numel;
    int64_t off_inner[N], off_outer[N];
    inner.offsets(i - rest * inner_numel, off_inner);
    j = rest % size;
    outer.offsets(rest / size, off_outer);
    for (int k = 0; k < N; ++k) off[k] = off_inner[k] + off_outer[k];
  }
};

// The split of `shape` at `dim`, with each view's strides outside `dim`.
template <int N>
DimSplit<N> make_dim_split(const Shape& shape, int dim, const TensorView* const (&views)[N]) {
  TensorView outer_views[N], inner_views[N];
  const TensorView* outer_ptrs[N];
  const TensorView* inner_ptrs[N];
  const Shape outer_shape(shape.begin(), shape.begin() + dim), inner_shape(shape.begin() + dim + 1, shape.end());
  for (int k = 0; k < N; ++k) {
    outer_views[k].shape = outer_shape;
    outer_views[k].strides = Shape(views[k]->strides.begin(), views[k]->strides.begin() + dim);
    inner_views[k].shape = inner_shape;
    inner_views[k].strides = Shape(views[k]->strides.begin() + dim + 1, views[k]->strides.end());
    outer_ptrs[k] = &outer_views[k];
    inner_ptrs[k] = &inner_views[k];
  }
  DimSplit<N> s;
  s.outer = make_indexer<N>(outer_shape, outer_ptrs);
  s.inner = make_indexer<N>(inner_shape, inner_ptrs);
  s.size = shape[dim];
  s.inner_numel = inner_shape.numel();
  return s;
}

// What a kernel needs of the index tensor: data, one stride (index_select / index_add: the 1-D
// index), the exclusive bound and the op to name on a bad value.
template <class I>
struct IndexArg {
  const I* data;
  int64_t stride;
  int64_t limit;
  DeviceErrorCode op;
  DeviceErrorRecord* errors;
};

// Reads index at element offset `at`; false (and the error recorded) when outside [0, limit).
template <class I>
__device__ inline bool read_index(const IndexArg<I>& ix, int64_t at, int64_t position, int64_t& value) {
  value = static_cast<int64_t>(ix.data[at]);
  if (value >= 0 && value < ix.limit) return true;
  report_bad_index(ix.errors, ix.op, value, ix.limit, position);
  return false;
}

inline void check_index_args(const char* op, const TensorView& index, int dim, int ndim) {
  TG_CHECK(is_index(index.dtype), "{}: index dtype must be int64 or int32, got {}", op, index.dtype);
  TG_CHECK(dim >= 0 && dim < ndim, "{}: dim {} is out of range for a tensor of {} dims", op, dim, ndim);
}

template <class I>
IndexArg<I> index_arg(const TensorView& index, int64_t stride, int64_t limit, DeviceErrorCode op) {
  return {static_cast<const I*>(index.data), stride, limit, op, device_error_record()};
}

// The stride of a 1-D (or 0-d) index.
inline int64_t stride_1d(const TensorView& index) { return index.ndim() > 0 ? index.strides[0] : 1; }

// Calls f(I{}) with the index's C++ type.
template <class F>
void dispatch_index(DType t, F&& f) {
  if (t == DType::Int64) f(int64_t{});
  else f(int32_t{});
}

// Calls f(T{}) with the arithmetic type of the dtype; Bool cannot be added.
template <class F>
void dispatch_addable(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Bool: break;
    case DType::BFloat16: break;  // computed in float32 around this kernel (kernels/bf16_bridge.h)
  }
  throw Error(fmt::format("{}: dtype {} is not supported", op, t));
}

}  // namespace tapegrad::kernels::cuda::index_detail
