// index_add.cu — the CUDA adds of the indexing ops, deterministic: index_add along a dim (the
// embedding's backward) and scatter_add (gather's backward). No float atomics: each output element is
// summed by one thread, in the CPU backend's order (kernels/cpu/index.cpp adds src slices in position
// order), so the result is bitwise the CPU's and the same on every run, also when an index repeats —
// which it always does in real text (a batch repeats token ids).
//
// index_add(out, dim, index[N], src): out viewed as [outer, V, inner], src as [outer, N, inner];
//   out[o, v, c] = ((out[o, v, c] + src[o, p1, c]) + src[o, p2, c]) + …   for p1 < p2 < … with index[p] = v.
// A stable counting sort of the N positions by index value (integer atomics only: their results are
// exact), then a segmented sum:
//   0. zero_kernel     count ← 0
//   1. count_kernel    key[p] = index[p] (−1 when out of range: recorded, skipped); count[v] += 1
//   2. scan_kernel     one block: offset[v] = Σ_{u<v} count[u], offset[V] = the valid positions; count ← 0
//   3. place_kernel    bucket[offset[v] + atomicAdd(count[v], 1)] = p     (order inside a bucket arbitrary)
//   4. rank_kernel     sorted[offset[v] + #{q in bucket v : q < p}] = p   (now in position order: stable)
//   5. bucket_sum_kernel  one thread per (o, slot k, c), neighbouring threads along c (coalesced); the
//                      thread of a bucket's first slot sums the bucket in order into a register and stores
//                      once. Only buckets with positions write.
// Cost: O(N + V) plus Σ_v count[v]² in step 4 (one id repeated N times: N² comparisons over N
// threads) and the longest bucket's length in step 5 (the adds of one output element are sequential
// by definition). Scratch: (3N + 2V + 1) int32 from the caching allocator (a graph's pool while
// capturing); nothing is read back on the host, so index_add can be captured in a CUDA graph.
//
// scatter_add(out, dim, index, src) (src read at index's coordinates; dim of length L): one thread per
// column (every coordinate but dim) adds its L elements in order — the CPU's row-major loop order
// along dim — into out; no two columns write the same element. Parallel over the columns: gather's
// backward on [N, V] logits with an [N, 1] index is N columns of length 1.
#include <cstdint>
#include <limits>

#include "kernels/cuda/index_args.h"

namespace tapegrad::kernels::cuda {
namespace {

using namespace index_detail;

constexpr int kThreads = 256;
constexpr int kScanThreads = 1024;

__global__ void zero_kernel(int32_t* p, int64_t n) {
  TG_GRID_STRIDE(i, n) p[i] = 0;
}

// key[p] = index[p] (−1 when out of range), count[key[p]] += 1.
template <class I>
__global__ void count_kernel(IndexArg<I> index, int64_t n, int32_t* key, int32_t* count) {
  TG_GRID_STRIDE(p, n) {
    int64_t v;
    if (read_index(index, p * index.stride, p, v)) {
      key[p] = static_cast<int32_t>(v);
      atomicAdd(&count[v], 1);
    } else {
      key[p] = -1;
    }
  }
}

// One block of kScanThreads: each thread scans a run of consecutive counts; the runs' totals are
// scanned in shared memory (Hillis–Steele). offset[v] = Σ_{u<v} count[u]; offset[V] = the total.
// count is cleared: it is place_kernel's cursor.
__global__ void scan_kernel(int32_t* count, int32_t* offset, int64_t v_size) {
  __shared__ int32_t totals[kScanThreads];
  const int t = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  const int64_t per = (v_size + threads - 1) / threads;
  const int64_t begin = t * per < v_size ? t * per : v_size;
  const int64_t end = begin + per < v_size ? begin + per : v_size;
  int32_t own = 0;
  for (int64_t v = begin; v < end; ++v) own += count[v];
  totals[t] = own;
  __syncthreads();
  for (int d = 1; d < threads; d *= 2) {
    const int32_t add = t >= d ? totals[t - d] : 0;
    __syncthreads();
    totals[t] += add;
    __syncthreads();
  }
  int32_t run = totals[t] - own;  // exclusive prefix of this thread's run
  for (int64_t v = begin; v < end; ++v) {
    const int32_t c = count[v];
    offset[v] = run;
    run += c;
    count[v] = 0;
  }
  if (t == threads - 1) offset[v_size] = totals[t];
}

// bucket[offset[v] + (arrival order)] = p for each valid position p with key v.
__global__ void place_kernel(const int32_t* key, int64_t n, const int32_t* offset, int32_t* cursor, int32_t* bucket) {
  TG_GRID_STRIDE(p, n) {
    const int32_t v = key[p];
    if (v >= 0) bucket[offset[v] + atomicAdd(&cursor[v], 1)] = static_cast<int32_t>(p);
  }
}

// sorted[offset[v] + rank] = p, rank = the positions of p's bucket smaller than p.
__global__ void rank_kernel(const int32_t* key, int64_t n, const int32_t* offset, const int32_t* bucket,
                            int32_t* sorted) {
  TG_GRID_STRIDE(p, n) {
    const int32_t v = key[p];
    if (v < 0) continue;
    const int32_t first = offset[v], last = offset[v + 1];
    int32_t rank = 0;
    for (int32_t k = first; k < last; ++k) rank += bucket[k] < p ? 1 : 0;
    sorted[first + rank] = static_cast<int32_t>(p);
  }
}

// Over src's shape [outer, N, inner] (split operands: src, out), slot k of the sorted positions in place
// of the position: the thread of a bucket's first slot sums the bucket's src slices in order into out.
template <class T>
__global__ void bucket_sum_kernel(T* out, const T* src, const int32_t* key, const int32_t* offset,
                                  const int32_t* sorted, int64_t v_size, DimSplit<2> split, int64_t src_dim_stride,
                                  int64_t out_dim_stride, int64_t n) {
  const int32_t valid = offset[v_size];
  TG_GRID_STRIDE(i, n) {
    int64_t k, off[2];
    split.split(i, k, off);
    if (k >= valid) continue;
    const int32_t v = key[sorted[k]];
    if (offset[v] != k) continue;  // not the bucket's first slot
    const int32_t last = offset[v + 1];
    T* dst = out + off[1] + v * out_dim_stride;
    T acc = *dst;
    int32_t m = static_cast<int32_t>(k);
    for (; m + 4 <= last; m += 4) {  // four loads in flight, added in order
      const T a = src[off[0] + sorted[m] * src_dim_stride], b = src[off[0] + sorted[m + 1] * src_dim_stride],
              c = src[off[0] + sorted[m + 2] * src_dim_stride], d = src[off[0] + sorted[m + 3] * src_dim_stride];
      acc += a;
      acc += b;
      acc += c;
      acc += d;
    }
    for (; m < last; ++m) acc += src[off[0] + sorted[m] * src_dim_stride];
    *dst = acc;
  }
}

// One thread per column of index (split over index's shape with dim's extent 1; operands out, index,
// src): out[col, index[col, j]] += src[col, j] for j = 0, 1, …, length − 1 in order.
template <class T, class I>
__global__ void scatter_add_columns_kernel(T* out, const T* src, IndexArg<I> index, DimSplit<3> split, int64_t length,
                                           int64_t out_dim_stride, int64_t src_dim_stride, int64_t columns) {
  TG_GRID_STRIDE(col, columns) {
    int64_t unused, off[3];
    split.split(col, unused, off);
    const int64_t outer = col / split.inner_numel, inner = col - outer * split.inner_numel;
    for (int64_t j = 0; j < length; ++j) {
      const int64_t position = (outer * length + j) * split.inner_numel + inner;  // row-major in index
      int64_t k;
      if (!read_index(index, off[1] + j * index.stride, position, k)) continue;
      out[off[0] + k * out_dim_stride] += src[off[2] + j * src_dim_stride];
    }
  }
}

// The int32 scratch of index_add's sort, in one block.
struct SortScratch {
  SortScratch(Backend& backend, int64_t n, int64_t v_size)
      : buffer(backend, size_t(3 * n + 2 * v_size + 1) * sizeof(int32_t)),
        key(buffer.as<int32_t>()),
        bucket(key + n),
        sorted(bucket + n),
        count(sorted + n),
        offset(count + v_size) {}
  ScratchBuffer buffer;
  int32_t *key, *bucket, *sorted, *count, *offset;
};

}  // namespace

void CudaBackend::index_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) {
  check_index_args("index_add", index, dim, out.ndim());
  dispatch_addable(out.dtype, "index_add", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = src.numel();
    if (n == 0) return;
    const int64_t positions = src.shape[dim], v_size = out.shape[dim];
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max() - 1;
    TG_CHECK(positions <= kMax && v_size <= kMax,
             "index_add: {} positions into a dim of size {}: the CUDA kernel takes at most {} of each", positions,
             v_size, kMax);
    const SortScratch s(*this, positions, v_size);
    launch(zero_kernel, dim3(blocks_for(v_size, kThreads)), dim3(kThreads), 0, s.count, v_size);
    dispatch_index(index.dtype, [&](auto itag) {
      using I = decltype(itag);
      launch(count_kernel<I>, dim3(blocks_for(positions, kThreads)), dim3(kThreads), 0,
             index_arg<I>(index, stride_1d(index), v_size, DeviceErrorCode::IndexAdd), positions, s.key, s.count);
    });
    launch(scan_kernel, dim3(1), dim3(kScanThreads), 0, s.count, s.offset, v_size);
    launch(place_kernel, dim3(blocks_for(positions, kThreads)), dim3(kThreads), 0, s.key, positions, s.offset,
           s.count, s.bucket);
    launch(rank_kernel, dim3(blocks_for(positions, kThreads)), dim3(kThreads), 0, s.key, positions, s.offset,
           s.bucket, s.sorted);
    const TensorView* const views[2] = {&src, &out};
    const DimSplit<2> split = make_dim_split<2>(src.shape, dim, views);
    launch(bucket_sum_kernel<T>, dim3(blocks_for(n, kThreads)), dim3(kThreads), 0, static_cast<T*>(out.data),
           static_cast<const T*>(src.data), s.key, s.offset, s.sorted, v_size, split, src.strides[dim],
           out.strides[dim], n);
  });
}

void CudaBackend::scatter_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) {
  check_index_args("scatter_add", index, dim, out.ndim());
  TG_CHECK(index.ndim() == out.ndim() && src.ndim() == out.ndim(),
           "scatter_add: out, index and src must have the same number of dims, got {}, {} and {}", out.ndim(),
           index.ndim(), src.ndim());
  dispatch_addable(out.dtype, "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    if (index.numel() == 0) return;
    const int64_t length = index.shape[dim], columns = index.numel() / length;
    Shape column_shape = index.shape;  // index's shape with dim's extent 1: one element per column
    column_shape[dim] = 1;
    const TensorView* const views[3] = {&out, &index, &src};
    const DimSplit<3> split = make_dim_split<3>(column_shape, dim, views);
    dispatch_index(index.dtype, [&](auto itag) {
      using I = decltype(itag);
      launch(scatter_add_columns_kernel<T, I>, dim3(blocks_for(columns, kThreads)), dim3(kThreads), 0,
             static_cast<T*>(out.data), static_cast<const T*>(src.data),
             index_arg<I>(index, index.strides[dim], out.shape[dim], DeviceErrorCode::ScatterAdd), split, length,
             out.strides[dim], src.strides[dim], columns);
    });
  });
}

}  // namespace tapegrad::kernels::cuda
