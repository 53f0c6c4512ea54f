// reduce.cu — CUDA reductions: sum / max / min over any set of dims (to the keepdim shape), and
// max_along (values + Int64 arg-max indices along one dim).
//
// Both are one kernel over "rows": row o is the reduced slice of output element o (the reduced
// dims, merged by make_indexer), reduced by a group of lanes (kernels/cuda/rows.h: plan_rows picks
// lanes-per-row so warps read memory in order whether the reduced dims are the fastest-moving —
// sum over the last dim — or not — sum over the batch dim of [N, C]). Each lane combines a strided
// part of its row in a register, then the row's lanes combine in a shared-memory tree.
// Few outputs with long rows (a full sum of 10⁶ elements): the rows are split into slices along
// grid.y; each (row, slice) writes a partial accumulator to a temporary buffer and a second kernel
// combines the slices of each output in order.
//
// Semantics are the CPU's (kernels/cpu/reduce.cpp): sums accumulate in Accum<T> (double for
// floats, int64 for integers) and are cast back to T; max/min propagate NaN; an empty reduction
// gives the identity (0, −∞, +∞; lowest/highest for integers). max_along: the first maximum wins
// and NaN beats all (the first NaN) — decided by (value, index), so any combination order agrees.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/indexer.h"
#include "kernels/cuda/rows.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {
namespace {

// Split rows into grid.y slices only while the grid has fewer blocks than this (about what an
// H100 holds at once: 132 SMs × 8 blocks of 256 threads), and keep every slice long enough for
// kMinPerLane elements per lane.
constexpr int64_t kTargetBlocks = 1024;
constexpr int64_t kMinPerLane = 16;

template <class T>
__device__ inline bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}

// sum / max / min: Acc is the accumulator (Accum<T> for sums, T otherwise).
template <class T, ReduceOp Op>
struct Reduction {
  using Acc = std::conditional_t<Op == ReduceOp::Sum, typename cpu::Accum<T>::type, T>;
  __device__ static Acc identity() {
    using L = std::numeric_limits<T>;
    if constexpr (Op == ReduceOp::Sum) return Acc(0);
    else if constexpr (Op == ReduceOp::Max) return L::has_infinity ? -L::infinity() : L::lowest();
    else return L::has_infinity ? L::infinity() : L::max();
  }
  __device__ static Acc load(T x, int64_t) { return Acc(x); }
  __device__ static Acc combine(Acc a, Acc b) {
    if constexpr (Op == ReduceOp::Sum) return a + b;
    else if constexpr (Op == ReduceOp::Max) return (b > a || is_nan(b)) ? b : a;
    else return (b < a || is_nan(b)) ? b : a;
  }
  __device__ static void store(Acc a, T* values, int64_t*, int64_t value_off, int64_t) { values[value_off] = T(a); }
};

// max_along: (value, index) pairs; index −1 marks "no element yet".
template <class T>
struct ValueIndex {
  T value;
  int64_t index;
};
template <class T>
struct ArgMax {
  using Acc = ValueIndex<T>;
  __device__ static Acc identity() {
    using L = std::numeric_limits<T>;
    return {L::has_infinity ? -L::infinity() : L::lowest(), -1};
  }
  __device__ static Acc load(T x, int64_t index) { return {x, index}; }
  // The winner of two candidates: NaN beats all, then the larger value, then the smaller index.
  __device__ static Acc combine(Acc a, Acc b) {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    const bool a_nan = is_nan(a.value), b_nan = is_nan(b.value);
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && a.value != b.value) return a.value > b.value ? a : b;
    return a.index < b.index ? a : b;
  }
  __device__ static void store(Acc a, T* values, int64_t* indices, int64_t value_off, int64_t index_off) {
    values[value_off] = a.value;
    indices[index_off] = a.index;
  }
};

// Where the rows are: output o's row starts at in + kept offset 0 of o, its element r is at
// reduced offset r; the results go to kept offsets 1 (values) and 2 (indices).
struct Geometry {
  Indexer<3> kept;     // output index → offsets in (in, values, indices)
  Indexer<1> reduced;  // element of a row → offset in in
  int64_t n_out = 0, n_red = 0;
  int64_t slice_len = 0;  // elements of a row reduced by one block row (grid.y slices the row)
  RowMap map;
};

template <class T, class R>
__global__ void reduce_rows_kernel(Geometry g, const T* in, T* values, int64_t* indices, typename R::Acc* partial) {
  using Acc = typename R::Acc;
  __shared__ Acc scratch[kRowThreads];
  const int row_in_block = g.map.row_of(threadIdx.x), lane = g.map.lane_of(threadIdx.x);
  const int64_t r_begin = static_cast<int64_t>(blockIdx.y) * g.slice_len;
  const int64_t r_end = r_begin + g.slice_len < g.n_red ? r_begin + g.slice_len : g.n_red;
  const bool narrow_out = narrow_index(g.n_out), narrow_red = narrow_index(g.n_red);
  // Block-uniform loop (every thread reaches group_reduce's barriers the same number of times).
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * g.map.rows; first < g.n_out;
       first += static_cast<int64_t>(gridDim.x) * g.map.rows) {
    const int64_t o = first + row_in_block;
    const bool active = o < g.n_out;
    Acc acc = R::identity();
    int64_t off[3] = {0, 0, 0};
    if (active) {
      element_offsets(g.kept, o, narrow_out, off);
      const T* row = in + off[0];
      for (int64_t r = r_begin + lane; r < r_end; r += g.map.lanes) {
        int64_t x_off[1];
        element_offsets(g.reduced, r, narrow_red, x_off);
        acc = R::combine(acc, R::load(row[x_off[0]], r));
      }
    }
    acc = group_reduce<R>(acc, scratch, g.map);
    if (active && lane == 0) {
      if (partial != nullptr) partial[static_cast<int64_t>(blockIdx.y) * g.n_out + o] = acc;
      else R::store(acc, values, indices, off[1], off[2]);
    }
  }
}

// Combines the slices' partial results of each output, slice order, and stores them.
template <class T, class R>
__global__ void reduce_slices_kernel(Indexer<3> kept, int64_t n_out, int slices, const typename R::Acc* partial,
                                     T* values, int64_t* indices) {
  const bool narrow = narrow_index(n_out);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < n_out; o += step) {
    typename R::Acc acc = partial[o];
    for (int s = 1; s < slices; ++s) acc = R::combine(acc, partial[s * n_out + o]);
    int64_t off[3];
    element_offsets(kept, o, narrow, off);
    R::store(acc, values, indices, off[1], off[2]);
  }
}

// Reduces `in` over the dims with reduced[d] into values (and indices, for ArgMax), both of in's
// ndim with size 1 on the reduced dims.
template <class T, class R>
void reduce_rows(CudaBackend& be, const TensorView& in, const bool* reduced, const TensorView& values,
                 const TensorView& indices) {
  using Acc = typename R::Acc;
  const int nd = in.ndim();
  TensorView kin, kval, kidx, rin;  // the kept / reduced dims of each operand
  int fastest = -1;
  for (int d = 0; d < nd; ++d) {
    if (in.shape[d] == 1) continue;
    if (fastest < 0 || std::abs(in.strides[d]) < std::abs(in.strides[fastest])) fastest = d;
    if (reduced[d]) {
      rin.shape.push_back(in.shape[d]);
      rin.strides.push_back(in.strides[d]);
    } else {
      kin.shape.push_back(in.shape[d]);
      kin.strides.push_back(in.strides[d]);
      kval.strides.push_back(values.strides[d]);
      kidx.strides.push_back(indices.strides[d]);
    }
  }
  Geometry g;
  g.n_out = kin.shape.numel();
  g.n_red = rin.shape.numel();
  if (g.n_out == 0) return;
  const TensorView* const kept_views[3] = {&kin, &kval, &kidx};
  const TensorView* const red_views[1] = {&rin};
  g.kept = make_indexer<3>(kin.shape, kept_views);
  g.reduced = make_indexer<1>(rin.shape, red_views);
  const bool rows_contiguous = fastest < 0 || reduced[fastest];
  g.map = plan_rows(g.n_out, g.n_red, rows_contiguous);

  const int64_t blocks = (g.n_out + g.map.rows - 1) / g.map.rows;
  const int64_t min_slice = kMinPerLane * g.map.lanes;
  int64_t slices = 1;
  if (blocks < kTargetBlocks && g.n_red >= 2 * min_slice)
    slices = std::min((kTargetBlocks + blocks - 1) / blocks, g.n_red / min_slice);
  g.slice_len = (g.n_red + slices - 1) / slices;
  if (g.slice_len == 0) g.slice_len = 1;
  slices = (g.n_red + g.slice_len - 1) / g.slice_len;
  if (slices < 1) slices = 1;

  T* out_values = static_cast<T*>(values.data);
  int64_t* out_indices = static_cast<int64_t*>(indices.data);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(blocks, 65535)), static_cast<unsigned>(slices));
  if (slices == 1) {
    launch(reduce_rows_kernel<T, R>, grid, kRowThreads, 0, g, static_cast<const T*>(in.data), out_values,
           out_indices, static_cast<Acc*>(nullptr));
    return;
  }
  // Partial results [slices, n_out] from the caching allocator, freed once the work is queued
  // (stream order: the next user of the block runs after these kernels).
  const size_t bytes = static_cast<size_t>(slices * g.n_out) * sizeof(Acc);
  const ScratchBuffer partial(be, bytes);
  Acc* partial_acc = partial.as<Acc>();
  launch(reduce_rows_kernel<T, R>, grid, kRowThreads, 0, g, static_cast<const T*>(in.data), out_values, out_indices,
         partial_acc);
  launch(reduce_slices_kernel<T, R>, blocks_for(g.n_out, kRowThreads), kRowThreads, 0, g.kept, g.n_out,
         static_cast<int>(slices), static_cast<const Acc*>(partial_acc), out_values, out_indices);
}

}  // namespace

void CudaBackend::reduce(ReduceOp op, const TensorView& out, const TensorView& in) {
  cpu::dispatch_all(in.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw Error("reduce: dtype bool is not supported (convert to an integer or float dtype first)");
    } else {
      bool reduced[kMaxDims] = {};
      for (int d = 0; d < in.ndim(); ++d) reduced[d] = in.shape[d] != 1 && out.shape[d] == 1;
      switch (op) {
        case ReduceOp::Sum: return reduce_rows<T, Reduction<T, ReduceOp::Sum>>(*this, in, reduced, out, out);
        case ReduceOp::Max: return reduce_rows<T, Reduction<T, ReduceOp::Max>>(*this, in, reduced, out, out);
        case ReduceOp::Min: return reduce_rows<T, Reduction<T, ReduceOp::Min>>(*this, in, reduced, out, out);
      }
    }
  });
}

void CudaBackend::max_along(const TensorView& values, const TensorView& indices, const TensorView& in, int dim) {
  TG_CHECK(dim >= 0 && dim < in.ndim() && in.shape[dim] > 0, "max: cannot take the maximum along dim {} of shape {}",
           dim, in.shape);
  cpu::dispatch_all(in.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw Error("max: dtype bool is not supported");
    } else {
      bool reduced[kMaxDims] = {};
      reduced[dim] = true;
      reduce_rows<T, ArgMax<T>>(*this, in, reduced, values, indices);
    }
  });
}

}  // namespace tapegrad::kernels::cuda
