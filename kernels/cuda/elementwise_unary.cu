// elementwise_unary.cu — CUDA unary ops y = f(x; p) (unary_ops.def; the functors of unary_functors.h, shared
// with the CPU) in float32, float64 and bfloat16 storage (float32 math, rounded once). The map kernel:
// elementwise_map.h.
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
struct UnaryValue {  // y = f(x; p); T is the compute type (float32 for bfloat16 storage)
  T p;
  __device__ T operator()(T x) const { return F::f(x, p); }
};

}  // namespace

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

}  // namespace tapegrad::kernels::cuda
