// fused_swiglu.cu — CUDA fused SwiGLU gate: out = silu(a)⊙b and its backward, elementwise over
// one shape with any strides.
//
//   σ = 1/(1 + e^(−a)),  silu(a) = a·σ,  out = silu(a)·b
//   da = g·b·silu'(a) = (g·b)·σ·(1 + a·(1 − σ)),   db = g·silu(a)
// The math is the shared functors of kernels/unary_functors.h (fn::Silu value and derivative), as
// on the CPU. Grid-stride loops, one element per thread per step; when every operand is
// contiguous the linear index is the offset, else an Indexer (indexer.h) turns it into each
// operand's offset. The backward writes only the outputs that are asked for (data != nullptr).
// bfloat16 (Backend::native_bf16): S is the storage type, C = compute_t<S> the type of the math — loaded
// bfloat16 widens to float32, each output is rounded once on the store (what the bf16 bridge computes).
#include <type_traits>

#include "kernels/fused_args.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/indexer.h"
#include "kernels/cuda/runtime.h"
#include "kernels/unary_functors.h"

namespace tapegrad::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Operands 0..2: out, a, b.
template <class S, bool Contig>
__global__ void swiglu_kernel(S* out, const S* a, const S* b, Indexer<3> ix, int64_t n) {
  using C = cpu::compute_t<S>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[3] = {i, i, i};
    if constexpr (!Contig) ix.offsets(i, off);
    out[off[0]] = S(fn::Silu::f(C(a[off[1]]), C(0)) * C(b[off[2]]));
  }
}

// Operands 0..4: grad_a, grad_b, grad_out, a, b. WantA / WantB: which gradients are written.
template <class S, bool Contig, bool WantA, bool WantB>
__global__ void swiglu_backward_kernel(S* da, S* db, const S* g, const S* a, const S* b, Indexer<5> ix, int64_t n) {
  using C = cpu::compute_t<S>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[5] = {i, i, i, i, i};
    if constexpr (!Contig) ix.offsets(i, off);
    const C gv = C(g[off[2]]), av = C(a[off[3]]);
    if constexpr (WantA) da[off[0]] = S((gv * C(b[off[4]])) * fn::Silu::df(av, av, C(0)));  // (g·b)·σ·(1 + a(1 − σ))
    if constexpr (WantB) db[off[1]] = S(gv * fn::Silu::f(av, C(0)));                        // g·a·σ
  }
}

}  // namespace

void CudaBackend::swiglu(const TensorView& out, const TensorView& a, const TensorView& b) {
  const char* op = "swiglu";
  check_same_as_a(op, "b", b, a);
  check_same_as_a(op, "out", out, a);
  cpu::dispatch_floating_storage(a.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = a.numel();
    const Indexer<3> ix = make_indexer<3>(a.shape, {&out, &a, &b});
    const bool contig = out.is_contiguous() && a.is_contiguous() && b.is_contiguous();
    const unsigned blocks = blocks_for(n, kThreads);
    if (contig)
      launch(swiglu_kernel<T, true>, dim3(blocks), dim3(kThreads), 0, static_cast<T*>(out.data),
             static_cast<const T*>(a.data), static_cast<const T*>(b.data), ix, n);
    else
      launch(swiglu_kernel<T, false>, dim3(blocks), dim3(kThreads), 0, static_cast<T*>(out.data),
             static_cast<const T*>(a.data), static_cast<const T*>(b.data), ix, n);
  });
}

void CudaBackend::swiglu_backward(const TensorView& grad_a, const TensorView& grad_b, const TensorView& grad_out,
                                  const TensorView& a, const TensorView& b) {
  const char* op = "swiglu backward";
  check_same_as_a(op, "b", b, a);
  check_same_as_a(op, "grad_out", grad_out, a);
  const bool want_a = grad_a.data != nullptr, want_b = grad_b.data != nullptr;
  if (want_a) check_same_as_a(op, "grad_a", grad_a, a);
  if (want_b) check_same_as_a(op, "grad_b", grad_b, a);
  if (!want_a && !want_b) return;
  cpu::dispatch_floating_storage(a.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = a.numel();
    // A gradient that is not asked for takes grad_out's strides (never written), so it does not
    // keep dims from merging.
    const TensorView& va = want_a ? grad_a : grad_out;
    const TensorView& vb = want_b ? grad_b : grad_out;
    const Indexer<5> ix = make_indexer<5>(a.shape, {&va, &vb, &grad_out, &a, &b});
    const bool contig =
        va.is_contiguous() && vb.is_contiguous() && grad_out.is_contiguous() && a.is_contiguous() && b.is_contiguous();
    const unsigned blocks = blocks_for(n, kThreads);
    T* da = static_cast<T*>(grad_a.data);
    T* db = static_cast<T*>(grad_b.data);
    const T* g = static_cast<const T*>(grad_out.data);
    const T* av = static_cast<const T*>(a.data);
    const T* bv = static_cast<const T*>(b.data);
    auto go = [&](auto contiguous, auto wa, auto wb) {
      constexpr bool C = decltype(contiguous)::value, A = decltype(wa)::value, B = decltype(wb)::value;
      launch(swiglu_backward_kernel<T, C, A, B>, dim3(blocks), dim3(kThreads), 0, da, db, g, av, bv, ix, n);
    };
    auto with_outputs = [&](auto contiguous) {
      if (want_a && want_b) go(contiguous, std::true_type{}, std::true_type{});
      else if (want_a) go(contiguous, std::true_type{}, std::false_type{});
      else go(contiguous, std::false_type{}, std::true_type{});
    };
    if (contig) with_outputs(std::true_type{});
    else with_outputs(std::false_type{});
  });
}

}  // namespace tapegrad::kernels::cuda
