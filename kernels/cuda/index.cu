// index.cu — CUDA indexing kernels: index_select / index_add along a dim (the embedding lookup and
// its backward) and gather / scatter_add (torch.gather semantics). The index is Int32 or Int64.
//
// Every kernel is elementwise over one tensor (one thread per element, grid-stride loop, 256-thread
// blocks; neighbouring threads take neighbouring row-major elements, so the innermost dim — the
// embedding's feature dim — is coalesced):
//   index_select  over out:  out[.., j, ..]        = in[.., index[j], ..]
//   index_add     over src:  out[.., index[j], ..] += src[.., j, ..]        (atomicAdd)
//   gather        over out:  out[i][j][k]          = in[i][index[i][j][k]][k]   (dim 1 shown)
//   scatter_add   over src:  out[i][index[i][j][k]][k] += src[i][j][k]      (atomicAdd)
// Repeated indices accumulate through atomicAdd (the float sums' order is not fixed). A thread
// meeting an index outside [0, size) records it in the device error record (runtime.h) and skips
// that element; the host throws at the next synchronisation, naming the op.
#include <cstdint>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/indexer.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {
namespace {

constexpr int kThreads = 256;

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

// atomicAdd for every dtype the adds support (int64 through the unsigned 64-bit overload:
// two's-complement addition is the same operation).
__device__ inline void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ inline void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ inline void atomic_add(int32_t* p, int32_t v) { atomicAdd(reinterpret_cast<int*>(p), static_cast<int>(v)); }
__device__ inline void atomic_add(int64_t* p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
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

// ---- kernels (T: an element type of the data; I: int32_t or int64_t) ----

// out[.., j, ..] = in[.., index[j], ..]; split over out with operands (out, in).
template <class T, class I>
__global__ void index_select_kernel(T* out, const T* in, IndexArg<I> index, DimSplit<2> split, int64_t out_dim_stride,
                                    int64_t in_dim_stride, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t j, off[2], src;
    split.split(i, j, off);
    if (!read_index(index, j * index.stride, j, src)) continue;
    out[off[0] + j * out_dim_stride] = in[off[1] + src * in_dim_stride];
  }
}

// out[.., index[j], ..] += src[.., j, ..]; split over src with operands (src, out).
template <class T, class I>
__global__ void index_add_kernel(T* out, const T* src, IndexArg<I> index, DimSplit<2> split, int64_t src_dim_stride,
                                 int64_t out_dim_stride, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t j, off[2], dst;
    split.split(i, j, off);
    if (!read_index(index, j * index.stride, j, dst)) continue;
    atomic_add(out + off[1] + dst * out_dim_stride, src[off[0] + j * src_dim_stride]);
  }
}

// out[e] = in[row(e) + index[e]·in_dim_stride]; ix over out's shape with operands
// (out, index, in with stride 0 along dim).
template <class T, class I>
__global__ void gather_kernel(T* out, const T* in, IndexArg<I> index, Indexer<3> ix, int64_t in_dim_stride,
                              int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[3], k;
    ix.offsets(i, off);
    if (!read_index(index, off[1], i, k)) continue;
    out[off[0]] = in[off[2] + k * in_dim_stride];
  }
}

// out[row(e) + index[e]·out_dim_stride] += src[e]; ix over index's shape with operands
// (out with stride 0 along dim, index, src).
template <class T, class I>
__global__ void scatter_add_kernel(T* out, const T* src, IndexArg<I> index, Indexer<3> ix, int64_t out_dim_stride,
                                   int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[3], k;
    ix.offsets(i, off);
    if (!read_index(index, off[1], i, k)) continue;
    atomic_add(out + off[0] + k * out_dim_stride, src[off[2]]);
  }
}

// ---- dispatch ----

void check_index_args(const char* op, const TensorView& index, int dim, int ndim) {
  TG_CHECK(is_index(index.dtype), "{}: index dtype must be int64 or int32, got {}", op, index.dtype);
  TG_CHECK(dim >= 0 && dim < ndim, "{}: dim {} is out of range for a tensor of {} dims", op, dim, ndim);
}

template <class I>
IndexArg<I> index_arg(const TensorView& index, int64_t stride, int64_t limit, DeviceErrorCode op) {
  return {static_cast<const I*>(index.data), stride, limit, op, device_error_record()};
}

// The stride of a 1-D (or 0-d) index.
int64_t stride_1d(const TensorView& index) { return index.ndim() > 0 ? index.strides[0] : 1; }

// Calls f(I{}) with the index's C++ type.
template <class F>
void dispatch_index(DType t, F&& f) {
  if (t == DType::Int64) f(int64_t{});
  else f(int32_t{});
}

// Calls f(T{}) with an unsigned type of the dtype's size: copies move bytes, whatever they mean.
template <class F>
void dispatch_bytes(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: return f(uint8_t{});
    case 4: return f(uint32_t{});
    default: return f(uint64_t{});
  }
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

}  // namespace

void CudaBackend::index_select(const TensorView& out, const TensorView& in, int dim, const TensorView& index) {
  check_index_args("index_select", index, dim, out.ndim());
  const int64_t n = out.numel();
  if (n == 0) return;
  const TensorView* const views[2] = {&out, &in};
  const DimSplit<2> split = make_dim_split<2>(out.shape, dim, views);
  dispatch_bytes(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(index.dtype, [&](auto itag) {
      using I = decltype(itag);
      launch(index_select_kernel<T, I>, dim3(blocks_for(n, kThreads)), dim3(kThreads), 0, static_cast<T*>(out.data),
             static_cast<const T*>(in.data),
             index_arg<I>(index, stride_1d(index), in.shape[dim], DeviceErrorCode::IndexSelect), split,
             out.strides[dim], in.strides[dim], n);
    });
  });
}

void CudaBackend::index_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) {
  check_index_args("index_add", index, dim, out.ndim());
  const int64_t n = src.numel();
  dispatch_addable(out.dtype, "index_add", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    const TensorView* const views[2] = {&src, &out};
    const DimSplit<2> split = make_dim_split<2>(src.shape, dim, views);
    dispatch_index(index.dtype, [&](auto itag) {
      using I = decltype(itag);
      launch(index_add_kernel<T, I>, dim3(blocks_for(n, kThreads)), dim3(kThreads), 0, static_cast<T*>(out.data),
             static_cast<const T*>(src.data),
             index_arg<I>(index, stride_1d(index), out.shape[dim], DeviceErrorCode::IndexAdd), split,
             src.strides[dim], out.strides[dim], n);
    });
  });
}

void CudaBackend::gather(const TensorView& out, const TensorView& in, int dim, const TensorView& index) {
  check_index_args("gather", index, dim, out.ndim());
  const int64_t n = out.numel();
  if (n == 0) return;
  TensorView row = in;  // `in` with stride 0 along dim: the index picks the position
  row.strides[dim] = 0;
  row.shape = out.shape;
  const TensorView* const views[3] = {&out, &index, &row};
  const Indexer<3> ix = make_indexer<3>(out.shape, views);
  dispatch_bytes(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(index.dtype, [&](auto itag) {
      using I = decltype(itag);
      launch(gather_kernel<T, I>, dim3(blocks_for(n, kThreads)), dim3(kThreads), 0, static_cast<T*>(out.data),
             static_cast<const T*>(in.data), index_arg<I>(index, 0, in.shape[dim], DeviceErrorCode::Gather), ix,
             in.strides[dim], n);
    });
  });
}

void CudaBackend::scatter_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) {
  check_index_args("scatter_add", index, dim, out.ndim());
  const int64_t n = index.numel();
  dispatch_addable(out.dtype, "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    if (n == 0) return;
    TensorView row = out;  // `out` with stride 0 along dim: the index picks the position
    row.strides[dim] = 0;
    row.shape = index.shape;
    const TensorView* const views[3] = {&row, &index, &src};
    const Indexer<3> ix = make_indexer<3>(index.shape, views);
    dispatch_index(index.dtype, [&](auto itag) {
      using I = decltype(itag);
      launch(scatter_add_kernel<T, I>, dim3(blocks_for(n, kThreads)), dim3(kThreads), 0, static_cast<T*>(out.data),
             static_cast<const T*>(src.data), index_arg<I>(index, 0, out.shape[dim], DeviceErrorCode::ScatterAdd),
             ix, out.strides[dim], n);
    });
  });
}

}  // namespace tapegrad::kernels::cuda
