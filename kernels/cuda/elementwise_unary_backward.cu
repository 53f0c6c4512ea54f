// elementwise_unary_backward.cu — the backward of the unary ops: dx = g · f'(x, y; p) (the df of
// unary_functors.h, shared with the CPU), in float32, float64 and bfloat16 storage (float32 math, rounded once).
// The map kernel: elementwise_map.h.
#include <type_traits>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/elementwise_map.h"
#include "kernels/unary_functors.h"

namespace tapegrad::kernels::cuda {
namespace {

using cpu::compute_t;
using cpu::dispatch_floating_storage;
using elementwise::check_same_dtype;
using elementwise::map;

template <class F, class T>
struct UnaryGrad {  // dx = g · f'(x, y; p)
  T p;
  __device__ T operator()(T g, T x, T y) const { return g * F::df(x, y, p); }
};

}  // namespace

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

}  // namespace tapegrad::kernels::cuda
