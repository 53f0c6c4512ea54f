// elementwise.cu — CUDA elementwise kernels: fill, strided copy with dtype conversion, unary ops and
// their backward, binary ops and comparisons (Bool output), where.
//
// Design: every function is one map kernel, out[i] = f(in_1[i], …, in_k[i]) over the output's
// elements, one thread per element in a grid-stride loop (256-thread blocks). Two variants:
//   * contiguous — every operand is laid out like the output (after make_indexer merged dims:
//     one dim of stride 1): plain linear indexing, no div/mod;
//   * strided — an Indexer<1 + k> turns the linear index into each operand's offset (broadcast
//     operands have stride 0); one 32-bit div/mod per merged dim when the tensor has < 2³² elements.
// The math of each op is the functor shared with the CPU (unary_functors.h, binary_functors.h).
//
// bfloat16 (Backend::native_bf16: unary, unary_backward, binary, where): storage type ≠ compute type. The
// kernels load bfloat16, widen it to float32 (exact), run the float32 functor and round the result once
// (to nearest even, kernels/bfloat16.h) on the store — the bf16 bridge's widen / float32 kernel / round,
// value for value, without its three passes over memory. Comparisons write Bool; where moves the bits.
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "kernels/binary_functors.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/indexer.h"
#include "kernels/cuda/rows.h"
#include "kernels/cuda/runtime.h"
#include "kernels/unary_functors.h"

namespace tapegrad::kernels::cuda {
namespace {

using cpu::compute_t;
using cpu::dispatch_floating_storage;

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
void check_same_dtype(const char* op, DType want, std::initializer_list<const TensorView*> views) {
  if (want != DType::BFloat16) return;  // float32/float64: as before
  for (const TensorView* v : views)
    TG_CHECK(v->data == nullptr || v->dtype == want, "{}: every operand must be {} here, got {}", op, want, v->dtype);
}

// Runs out = f(in...) elementwise: out holds TO, the k-th input TI_k (one view per input type).
template <class TO, class... TI, class F>
void map(F f, const TensorView& out, ViewOf<TI>... in) {
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

// ---- the element functions (trivially copyable: they are kernel arguments) ----

template <class T>
struct Constant {  // fill: out = v
  T v;
  __device__ T operator()() const { return v; }
};

template <class TO, class TI>
struct Convert {  // copy: out = TO(x); to Bool: x ≠ 0; float → int truncates toward zero
  __device__ TO operator()(TI x) const {
    if constexpr (std::is_same_v<TO, bool>) return x != TI(0);  // bfloat16: compared as float
    else if constexpr (std::is_same_v<TO, bfloat16>) return bfloat16(static_cast<float>(x));
    else if constexpr (std::is_same_v<TI, bfloat16>) return static_cast<TO>(static_cast<float>(x));
    else return static_cast<TO>(x);
  }
};

template <class F, class T>
struct UnaryValue {  // y = f(x; p); T is the compute type (float32 for bfloat16 storage)
  T p;
  __device__ T operator()(T x) const { return F::f(x, p); }
};

template <class F, class T>
struct UnaryGrad {  // dx = g · f'(x, y; p)
  T p;
  __device__ T operator()(T g, T x, T y) const { return g * F::df(x, y, p); }
};

template <class F, class T>
struct BinaryValue {  // out = a ∘ b (bool for comparisons)
  __device__ fn::binary_result_t<F, T> operator()(T a, T b) const { return F::f(a, b); }
};

template <class T>
struct Select {  // where: out = c ? a : b
  __device__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

}  // namespace

void CudaBackend::fill(const TensorView& out, double value) {
  cpu::dispatch_storage(out.dtype, [&](auto t) {
    using T = decltype(t);
    map<T>(Constant<T>{cpu::cast_scalar<T>(value)}, out);
  });
}

void CudaBackend::copy(const TensorView& out, const TensorView& in) {
  cpu::dispatch_storage(out.dtype, [&](auto to) {
    using TO = decltype(to);
    cpu::dispatch_storage(in.dtype, [&](auto ti) {
      using TI = decltype(ti);
      if constexpr (std::is_same_v<TO, TI>) {
        if (out.is_contiguous() && in.is_contiguous()) {
          copy_on_device(out.data, in.data, static_cast<size_t>(out.numel()) * sizeof(TO));
          return;
        }
      }
      map<TO, TI>(Convert<TO, TI>{}, out, in);
    });
  });
}

void CudaBackend::unary(UnaryOp op, const TensorView& out, const TensorView& in, double param) {
  dispatch_floating_storage(in.dtype, unary_op_name(op), [&](auto t) {
    using T = decltype(t);
    using C = compute_t<T>;
    check_same_dtype(unary_op_name(op), in.dtype, {&out});
    fn::visit_unary(op, [&](auto f) {
      using F = decltype(f);
      map<T, T>(UnaryValue<F, C>{static_cast<C>(param)}, out, in);
    });
  });
}

void CudaBackend::unary_backward(UnaryOp op, const TensorView& grad_in, const TensorView& grad_out,
                                 const TensorView& x, const TensorView& y, double param) {
  dispatch_floating_storage(grad_in.dtype, unary_op_name(op), [&](auto t) {
    using T = decltype(t);
    using C = compute_t<T>;
    check_same_dtype(unary_op_name(op), grad_in.dtype, {&grad_out, &x, &y});
    fn::visit_unary(op, [&](auto f) {
      using F = decltype(f);
      map<T, T, T, T>(UnaryGrad<F, C>{static_cast<C>(param)}, grad_in, grad_out, x, y);
    });
  });
}

void CudaBackend::binary(BinaryOp op, const TensorView& out, const TensorView& a, const TensorView& b) {
  if (a.dtype == DType::BFloat16) {
    check_same_dtype(binary_op_name(op), a.dtype, {&b});
    if (!is_comparison(op)) check_same_dtype(binary_op_name(op), a.dtype, {&out});
    fn::visit_binary(op, [&](auto f) {
      using F = decltype(f);
      map<fn::binary_result_t<F, bfloat16>, bfloat16, bfloat16>(BinaryValue<F, float>{}, out, a, b);
    });
    return;
  }
  cpu::dispatch_all(a.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw Error(fmt::format("{}: dtype bool is not supported", binary_op_name(op)));
    } else {
      fn::visit_binary(op, [&](auto f) {
        using F = decltype(f);
        map<fn::binary_result_t<F, T>, T, T>(BinaryValue<F, T>{}, out, a, b);
      });
    }
  });
}

void CudaBackend::where(const TensorView& out, const TensorView& cond, const TensorView& a, const TensorView& b) {
  if (out.dtype == DType::BFloat16) {  // moves bits: no arithmetic
    check_same_dtype("where", out.dtype, {&a, &b});
    map<bfloat16, bool, bfloat16, bfloat16>(Select<bfloat16>{}, out, cond, a, b);
    return;
  }
  cpu::dispatch_all(out.dtype, [&](auto t) {
    using T = decltype(t);
    map<T, bool, T, T>(Select<T>{}, out, cond, a, b);
  });
}

}  // namespace tapegrad::kernels::cuda
