// fused_add_rmsnorm.cu — CUDA residual add fused with the RMSNorm that follows it (backend.h: add_rms_norm,
// rms_norm_backward_add), rows [R, C], weight w [C], any strides (unit column strides take the fast path).
//
// Forward, per row (one pass over x and branch instead of an add kernel and a norm kernel):
//   h_j = X(T(x_j) + T(branch_j))                     stored; the norm reads h as stored
//   r   = T(1/sqrt(Σ_j T(h_j)² / C + eps))            (Σ in double),  rstd = r
//   y_j = Y(T(h_j)·r·T(w_j))                          fused_rmsnorm.cu's expression, y rounded once
// Backward (g = dL/dy, gw = g⊙w), the residual stream's gradient gathered in the same pass:
//   dx_k     = r·gw_k − x_k·(r³·mean_j(gw_j·x_j))     fused_rmsnorm.cu's expression, in T
//   grad_x_k = X(T(grad_residual_k) + dx_k)           or X(dx_k) without grad_residual (which may be grad_x
//                                                     itself: each element is read, then written, by one thread)
//   dw_j     = Σ_rows g_j·x_j·r                       rms_norm_common.h's deterministic column reduction
// So float32/float64 give the bits of binary(add) then rms_norm, and rms_norm_backward then binary(add), on
// this device; a bfloat16 call gives the bits of the same call widened by the bf16 bridge (T = float32).
// Storage types: X (x, h, weight, grad_x, grad_residual, grad_weight), B (branch), Y (y), G (grad_y);
// T = compute_t<X> stores rstd. The combinations (the bf16 bridge's native calls, and plain float32/float64):
//   forward   X = B = Y ∈ {float, double, bfloat16};  X = float, B and Y each float or bfloat16
//   backward  X = G ∈ {float, double, bfloat16};      X = float, G = bfloat16
// No host synchronisation, no host read of device data: capturable in a CUDA graph.
#include <cmath>
#include <type_traits>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/rms_norm_common.h"
#include "kernels/cuda/row_group.h"
#include "kernels/cuda/runtime.h"
#include "kernels/fused_args.h"

namespace tapegrad::kernels::cuda {
namespace {

using rms_norm_detail::launch_row_kernel;
using rms_norm_detail::launch_rms_norm_backward;

// ---- forward ----

// h, y [R, C], x, branch [R, C], w [C], rstd [R] at their strides (column strides 1 when Contig).
template <class X, class B, class Y, bool WarpRows, bool Contig, class T = cpu::compute_t<X>>
__global__ void add_rms_norm_kernel(X* TG_RESTRICT h, int64_t hs0, int64_t hs1, Y* TG_RESTRICT y, int64_t ys0,
                                    int64_t ys1, T* TG_RESTRICT rstd, int64_t rs, const X* TG_RESTRICT x, int64_t xs0,
                                    int64_t xs1, const B* TG_RESTRICT branch, int64_t bs0, int64_t bs1,
                                    const X* TG_RESTRICT w, int64_t ws, int64_t R, int64_t C, double eps) {
  __shared__ double scratch[32];
  const RowGroup<WarpRows> group{};
  const int64_t oh = Contig ? 1 : hs1, oy = Contig ? 1 : ys1, ox = Contig ? 1 : xs1, ob = Contig ? 1 : bs1;
  const int64_t ow = Contig ? 1 : ws;
  for (int64_t base = group.first_row(); base < R; base += group.row_step()) {
    const int64_t i = base + group.slot();
    const bool active = i < R;  // every thread still joins the reduction
    X* hr = h + (active ? i : 0) * hs0;
    double ss = 0;
    if (active) {
      const X* xr = x + i * xs0;
      const B* br = branch + i * bs0;
      for (int64_t j = group.rank(); j < C; j += group.size()) {
        const X hv = X(T(xr[j * ox]) + T(br[j * ob]));
        hr[j * oh] = hv;
        const double v = double(T(hv));
        ss += v * v;
      }
    }
    ss = group.sum(ss, scratch);
    if (!active) continue;
    const T r = T(1.0 / std::sqrt(ss / double(C) + eps));
    Y* yr = y + i * ys0;
    // h_j was written above by this same thread (same j): read back, no barrier needed.
    for (int64_t j = group.rank(); j < C; j += group.size()) yr[j * oy] = Y(T(hr[j * oh]) * r * T(w[j * ow]));
    if (group.rank() == 0) rstd[i * rs] = r;
  }
}

// ---- host side ----

// Calls f(X{}, B{}, Y{}) for the forward's storage combinations (header); anything else: one error.
template <class F>
void dispatch_add_rms_norm(const char* op, DType x, DType b, DType y, F&& f) {
  constexpr DType F32 = DType::Float32, F64 = DType::Float64, BF16 = DType::BFloat16;
  if (x == F64 && b == F64 && y == F64) return f(double{}, double{}, double{});
  if (x == BF16 && b == BF16 && y == BF16) return f(bfloat16{}, bfloat16{}, bfloat16{});
  if (x == F32 && b == F32 && y == F32) return f(float{}, float{}, float{});
  if (x == F32 && b == BF16 && y == F32) return f(float{}, bfloat16{}, float{});
  if (x == F32 && b == F32 && y == BF16) return f(float{}, float{}, bfloat16{});
  if (x == F32 && b == BF16 && y == BF16) return f(float{}, bfloat16{}, bfloat16{});
  throw Error(fmt::format("{}: x {}, branch {}, y {} is not supported on CUDA (float32/float64/bfloat16 x, branch "
                          "and y of x's dtype; or float32 x with a bfloat16 branch and/or y)",
                          op, x, b, y));
}

// Calls f(X{}, G{}) for the backward's storage combinations (header); anything else: one error.
template <class F>
void dispatch_rms_norm_backward_add(const char* op, DType x, DType g, F&& f) {
  constexpr DType F32 = DType::Float32, F64 = DType::Float64, BF16 = DType::BFloat16;
  if (x == F64 && g == F64) return f(double{}, double{});
  if (x == BF16 && g == BF16) return f(bfloat16{}, bfloat16{});
  if (x == F32 && g == F32) return f(float{}, float{});
  if (x == F32 && g == BF16) return f(float{}, bfloat16{});
  throw Error(fmt::format("{}: x {}, grad_y {} is not supported on CUDA (float32/float64/bfloat16 x with grad_y "
                          "of x's dtype; or float32 x with a bfloat16 grad_y)",
                          op, x, g));
}

}  // namespace

void CudaBackend::add_rms_norm(const TensorView& h, const TensorView& y, const TensorView& rstd, const TensorView& x,
                               const TensorView& branch, const TensorView& weight, double eps) {
  const char* op = "add_rms_norm";
  check_add_rms_norm_args(op, h, y, rstd, x, branch, weight);
  dispatch_add_rms_norm(op, x.dtype, branch.dtype, y.dtype, [&](auto xt, auto bt, auto yt) {
    using X = decltype(xt);
    using B = decltype(bt);
    using Y = decltype(yt);
    using T = cpu::compute_t<X>;
    const int64_t R = x.shape[0], C = x.shape[1];
    const bool contig = x.strides[1] == 1 && branch.strides[1] == 1 && h.strides[1] == 1 && y.strides[1] == 1 &&
                        weight.strides[0] == 1;
    launch_row_kernel(R, C, contig, [&](auto warp_rows, auto contiguous, unsigned blocks, int threads) {
      constexpr bool W = decltype(warp_rows)::value, Ct = decltype(contiguous)::value;
      launch(add_rms_norm_kernel<X, B, Y, W, Ct>, dim3(blocks), dim3(threads), 0, static_cast<X*>(h.data),
             h.strides[0], h.strides[1], static_cast<Y*>(y.data), y.strides[0], y.strides[1],
             static_cast<T*>(rstd.data), rstd.strides[0], static_cast<const X*>(x.data), x.strides[0], x.strides[1],
             static_cast<const B*>(branch.data), branch.strides[0], branch.strides[1],
             static_cast<const X*>(weight.data), weight.strides[0], R, C, eps);
    });
  });
}

void CudaBackend::rms_norm_backward_add(const TensorView& grad_x, const TensorView& grad_weight,
                                        const TensorView& grad_y, const TensorView& x, const TensorView& weight,
                                        const TensorView& rstd, const TensorView& grad_residual) {
  const char* op = "rms_norm_backward_add";
  check_rms_norm_backward_add_args(op, grad_x, grad_weight, grad_y, x, weight, rstd, grad_residual);
  dispatch_rms_norm_backward_add(op, x.dtype, grad_y.dtype, [&](auto xt, auto gt) {
    launch_rms_norm_backward<decltype(xt), decltype(gt)>(*this, grad_x, grad_weight, grad_y, x, weight, rstd,
                                                         grad_residual);
  });
}

}  // namespace tapegrad::kernels::cuda
