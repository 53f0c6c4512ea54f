// elementwise_map.h — the one map kernel behind every CUDA elementwise function (elementwise*.cu):
// out[i] = f(in_1[i], …, in_k[i]) over the output's elements, one thread per element in a grid-stride loop
// (256-thread blocks). Two variants:
//   * contiguous — every operand is laid out like the output (after make_indexer merged dims:
//     one dim of stride 1): plain linear indexing, no div/mod;
//   * strided — an Indexer<1 + k> turns the linear index into each operand's offset (broadcast
//     operands have stride 0); one 32-bit div/mod per merged dim when the tensor has < 2³² elements.
// bfloat16 storage: f computes in float32 and the store rounds once (to nearest even, kernels/bfloat16.h).
// The functions using it live in four files (fill/copy, unary, unary backward, binary/where) so that their many
// template instantiations compile in parallel and in less memory (the emulated build compiles them as C++).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "kernels/cuda/indexer.h"
#include "kernels/cuda/rows.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda::elementwise {

constexpr int kThreads = 256;

// out[i] = f(in[i]...) for i < n: all operands contiguous and of the output's layout.
template <class F, class TO, class... TI>
__global__ void map_contiguous_kernel(int64_t n, F f, TO* out, const TI*... in) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = static_cast<TO>(f(in[i]...));
}

template <class F, class TO, class... TI, size_t... I>
__device__ inline void map_one(const F& f, TO* out, const int64_t* off, std::index_sequence<I...>, const TI*... in) {
  out[off[0]] = static_cast<TO>(f(in[off[1 + I]]...));  // f computes in float32 for bfloat16 (rounded here)
}

// The same over strided operands: offsets from the Indexer (operand 0 is the output).
template <class F, class TO, class... TI>
__global__ void map_strided_kernel(Indexer<1 + sizeof...(TI)> ix, int64_t n, F f, TO* out, const TI*... in) {
  constexpr int N = 1 + sizeof...(TI);
  const bool narrow = narrow_index(n);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[N];
    element_offsets(ix, i, narrow, off);
    map_one(f, out, off, std::index_sequence_for<TI...>{}, in...);
  }
}

template <class>
using ViewOf = const TensorView&;

// A bfloat16 call's other operands must be bfloat16 too (the bridge widens calls that mix dtypes; an absent
// view, data == nullptr, is not read).
inline void check_same_dtype(const char* op, DType want, std::initializer_list<const TensorView*> views) {
  if (want != DType::BFloat16) return;  // float32/float64: as before
  for (const TensorView* v : views)
    TG_CHECK(v->data == nullptr || v->dtype == want, "{}: every operand must be {} here, got {}", op, want, v->dtype);
}

// Runs out = f(in...) elementwise: out holds TO, the k-th input TI_k (one view per input type).
template <class TO, class... TI, class F>
inline void map(F f, const TensorView& out, ViewOf<TI>... in) {
  constexpr int N = 1 + sizeof...(TI);
  const int64_t n = out.numel();
  if (n == 0) return;
  const TensorView* const views[N] = {&out, &in...};
  const Indexer<N> ix = make_indexer<N>(out.shape, views);
  bool contiguous = ix.ndim <= 1;
  for (int k = 0; k < N && ix.ndim == 1; ++k) contiguous &= ix.strides[k][0] == 1;
  const unsigned blocks = blocks_for(n, kThreads);
  if (contiguous) {
    launch(map_contiguous_kernel<F, TO, TI...>, blocks, kThreads, 0, n, f, static_cast<TO*>(out.data),
           static_cast<const TI*>(in.data)...);
  } else {
    launch(map_strided_kernel<F, TO, TI...>, blocks, kThreads, 0, ix, n, f, static_cast<TO*>(out.data),
           static_cast<const TI*>(in.data)...);
  }
}

}  // namespace tapegrad::kernels::cuda::elementwise
