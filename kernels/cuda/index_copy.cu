// index_copy.cu — CudaBackend::index_copy: slices of src written over slices of out along one dim, at
// positions read from a device index, with no host read of the index (no synchronisation, no device→host
// copy), so it can be captured in a CUDA graph: a decode step writes its K, V into the KV cache at a
// position held in device memory (nn/kv_cache.h, lm/graph_decoder.h).
//
// index_copy(out, dim, index[N], src): out viewed as [outer, V, inner], src as [outer, N, inner];
//   out[o, index[j], c] = src[o, j, c]      for every j < N.
// Pure data movement: any dtype (bfloat16, bool and integers too), moved as 1-, 2-, 4- or 8-byte words.
// The CPU's semantics: a repeated index writes the LAST j's slice; a bad index (outside [0, V)) is a device
// error (runtime.h: reported at the next check, naming index_copy, the index and its position) and then
// NOTHING is written. One thread per element of src, two paths:
//   * N ≤ kScanLimit (decoding: N = 1): one kernel. Each thread reads all N indices (any bad one → no
//     thread writes; the first bad one is reported) and writes only if no later j' has its index: O(N).
//   * larger N (or src empty: only the check runs): an int32 scratch owner[V] + an abort flag:
//       1. init_owner_kernel    owner ← −1, abort ← 0
//       2. claim_kernel         per j: a bad index is reported and sets abort; else atomicMax(owner[index[j]], j)
//       3. write_owned_kernel   per element of src: written if !abort and owner[index[j]] == j.
//     Integer atomics only: the result is the same on every run.
#include <cstdint>
#include <limits>

#include "kernels/cuda/index_args.h"

namespace tapegrad::kernels::cuda {
namespace {

using namespace index_detail;

constexpr int kThreads = 256;
constexpr int64_t kScanLimit = 32;  // indices each thread reads in the one-kernel path

// Where the element of src at (split) position i goes: off[0] in src, off[1] in out without dim's part.
struct CopyGeometry {
  DimSplit<2> split;  // over src's shape; operands src, out
  int64_t src_dim_stride, out_dim_stride, elements;
};

// One kernel for a few indices: all N are checked by every thread before any writes.
template <class E, class I>
__global__ void copy_scanned_kernel(E* out, const E* src, IndexArg<I> index, int64_t count, CopyGeometry g) {
  TG_GRID_STRIDE(i, g.elements) {
    bool valid = true;
    for (int64_t p = 0; p < count && valid; ++p) {
      int64_t unused;
      valid = read_index(index, p * index.stride, p, unused);
    }
    if (!valid) continue;
    int64_t j, off[2];
    g.split.split(i, j, off);
    const I target = index.data[j * index.stride];
    bool last = true;  // no later position writes the same slice
    for (int64_t p = j + 1; p < count && last; ++p) last = index.data[p * index.stride] != target;
    if (last) out[off[1] + static_cast<int64_t>(target) * g.out_dim_stride] = src[off[0] + j * g.src_dim_stride];
  }
}

// owner[v] = −1 for v < V; abort = 0.
__global__ void init_owner_kernel(int32_t* owner, int64_t v_size, int32_t* abort) {
  TG_GRID_STRIDE(v, v_size) owner[v] = -1;
  if (blockIdx.x == 0 && threadIdx.x == 0) *abort = 0;
}

// owner[index[p]] = the largest p with that index; a bad index is reported and sets abort.
template <class I>
__global__ void claim_kernel(IndexArg<I> index, int64_t count, int32_t* owner, int32_t* abort) {
  TG_GRID_STRIDE(p, count) {
    int64_t v;
    if (read_index(index, p * index.stride, p, v))
      atomicMax(&owner[v], static_cast<int32_t>(p));
    else
      *abort = 1;
  }
}

// Writes the elements of the positions that own their slice, unless an index was bad.
template <class E, class I>
__global__ void write_owned_kernel(E* out, const E* src, const I* index, int64_t index_stride, const int32_t* owner,
                                   const int32_t* abort, CopyGeometry g) {
  if (*abort != 0) return;
  TG_GRID_STRIDE(i, g.elements) {
    int64_t j, off[2];
    g.split.split(i, j, off);
    const int64_t v = static_cast<int64_t>(index[j * index_stride]);
    if (owner[v] == j) out[off[1] + v * g.out_dim_stride] = src[off[0] + j * g.src_dim_stride];
  }
}

// Calls f(E{}) with an unsigned word of the dtype's size (the copy moves bits, never converts).
template <class F>
void dispatch_word(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    default: break;
  }
  throw Error(fmt::format("index_copy: dtype {} is not supported", t));
}

void check_index_copy_args(const TensorView& out, int dim, const TensorView& index, const TensorView& src) {
  check_index_args("index_copy", index, dim, out.ndim());
  TG_CHECK(index.ndim() == 1, "index_copy: index must be 1-D, got shape {}", index.shape);
  TG_CHECK(src.dtype == out.dtype, "index_copy: src has dtype {} but out has {} (index_copy does not convert)",
           src.dtype, out.dtype);
  Shape expected = out.shape;
  expected[size_t(dim)] = index.shape[0];
  TG_CHECK(src.shape == expected,
           "index_copy: src must have out's shape {} with the index's length {} at dim {}, i.e. {}, got {}", out.shape,
           index.shape[0], dim, expected, src.shape);
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max() - 1;
  TG_CHECK(index.shape[0] <= kMax && out.shape[size_t(dim)] <= kMax,
           "index_copy: {} positions into a dim of size {}: the CUDA kernel takes at most {} of each", index.shape[0],
           out.shape[size_t(dim)], kMax);
}

}  // namespace

void CudaBackend::index_copy(const TensorView& out, int dim, const TensorView& index, const TensorView& src) {
  check_index_copy_args(out, dim, index, src);
  const int64_t count = index.shape[0], v_size = out.shape[size_t(dim)];
  if (count == 0) return;
  const TensorView* const views[2] = {&src, &out};
  const CopyGeometry g{make_dim_split<2>(src.shape, dim, views), src.strides[size_t(dim)], out.strides[size_t(dim)],
                       src.numel()};
  dispatch_word(out.dtype, [&](auto word) {
    using E = decltype(word);
    E* const out_data = static_cast<E*>(out.data);
    const E* const src_data = static_cast<const E*>(src.data);
    dispatch_index(index.dtype, [&](auto itag) {
      using I = decltype(itag);
      const IndexArg<I> ix = index_arg<I>(index, stride_1d(index), v_size, DeviceErrorCode::IndexCopy);
      if (count <= kScanLimit && g.elements > 0) {
        launch(copy_scanned_kernel<E, I>, dim3(blocks_for(g.elements, kThreads)), dim3(kThreads), 0, out_data,
               src_data, ix, count, g);
        return;
      }
      const ScratchBuffer scratch(*this, size_t(v_size + 1) * sizeof(int32_t));  // owner[V], abort
      int32_t* const owner = scratch.as<int32_t>();
      int32_t* const abort = owner + v_size;
      launch(init_owner_kernel, dim3(blocks_for(v_size, kThreads)), dim3(kThreads), 0, owner, v_size, abort);
      launch(claim_kernel<I>, dim3(blocks_for(count, kThreads)), dim3(kThreads), 0, ix, count, owner, abort);
      launch(write_owned_kernel<E, I>, dim3(blocks_for(g.elements, kThreads)), dim3(kThreads), 0, out_data,
             src_data, ix.data, ix.stride, owner, static_cast<const int32_t*>(abort), g);
    });
  });
}

}  // namespace tapegrad::kernels::cuda
