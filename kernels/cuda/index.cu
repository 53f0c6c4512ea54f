// index.cu — CUDA indexing kernels that copy: index_select along a dim (the embedding lookup) and
// gather (torch.gather semantics). The index is Int32 or Int64. The adds (index_add, scatter_add:
// their backwards) are in index_add.cu; what both files share is in index_args.h.
//
// Each kernel is elementwise over its output (one thread per element, grid-stride loop, 256-thread
// blocks; neighbouring threads take neighbouring row-major elements, so the innermost dim — the
// embedding's feature dim — is coalesced):
//   index_select  over out:  out[.., j, ..]        = in[.., index[j], ..]
//   gather        over out:  out[i][j][k]          = in[i][index[i][j][k]][k]   (dim 1 shown)
// A thread meeting an index outside [0, size) records it in the device error record (runtime.h) and
// skips that element; the host throws at the next synchronisation, naming the op.
#include <cstdint>

#include "kernels/cuda/index_args.h"

namespace tapegrad::kernels::cuda {
namespace {

using namespace index_detail;

constexpr int kThreads = 256;

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

// ---- dispatch ----

// Calls f(T{}) with an unsigned type of the dtype's size: copies move bytes, whatever they mean.
template <class F>
void dispatch_bytes(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: return f(uint8_t{});
    case 4: return f(uint32_t{});
    default: return f(uint64_t{});
  }
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

}  // namespace tapegrad::kernels::cuda
