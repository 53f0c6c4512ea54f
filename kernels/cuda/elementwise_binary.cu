// elementwise_binary.cu — CUDA binary ops out = a ∘ b with broadcasting (binary_ops.def; the functors of
// binary_functors.h, shared with the CPU), comparisons with Bool output, and where (out = c ? a : b). bfloat16
// operands compute in float32 and round once; where moves the bits. The map kernel: elementwise_map.h.
#include <type_traits>

#include "kernels/binary_functors.h"
#include "kernels/binary_op.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/elementwise_map.h"

namespace tapegrad::kernels::cuda {
namespace {

using elementwise::check_same_dtype;
using elementwise::map;

template <class F, class T>
struct BinaryValue {  // out = a ∘ b (bool for comparisons)
  __device__ fn::binary_result_t<F, T> operator()(T a, T b) const { return F::f(a, b); }
};

template <class T>
struct Select {  // where: out = c ? a : b
  __device__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

}  // namespace

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
