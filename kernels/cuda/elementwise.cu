// elementwise.cu — CUDA fill and strided copy with dtype conversion (the map kernel: elementwise_map.h).
// The other elementwise functions: elementwise_unary.cu (unary ops), elementwise_unary_backward.cu (their
// backward), elementwise_binary.cu (binary ops, comparisons with Bool output, where). The math of each op is the
// functor shared with the CPU (unary_functors.h, binary_functors.h).
//
// bfloat16 (Backend::native_bf16: unary, unary_backward, binary, where): storage type ≠ compute type. The
// kernels load bfloat16, widen it to float32 (exact), run the float32 functor and round the result once
// (to nearest even, kernels/bfloat16.h) on the store — the bf16 bridge's widen / float32 kernel / round,
// value for value, without its three passes over memory. Comparisons write Bool; where moves the bits.
#include <type_traits>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/elementwise_map.h"

namespace tapegrad::kernels::cuda {
namespace {

using elementwise::map;

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

}  // namespace tapegrad::kernels::cuda
