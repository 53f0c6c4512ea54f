// fused_rmsnorm.cu — CUDA fused RMSNorm over the rows of x [R, C] with weight w [C] (any strides;
// unit column strides take the fast path).
//
// Forward, per row:  r = 1/sqrt(mean_j x_j² + eps)  (Σ x² in double),  y_j = x_j·r·w_j,  rstd = r.
// Backward (g = dL/dy, gw = g⊙w):
//   dx_k = r·gw_k − x_k·(r³·mean_j(gw_j·x_j)),   dw_j = Σ_rows g_j·x_j·r   (written, not accumulated)
// Row kernels (forward, dx): one row group per row — a warp for rows of up to 256 elements (4 rows
// per 128-thread block), else a block of up to 256 threads (row_group.h) — one group reduction
// (Σ x² or Σ gw·x, in double), then an elementwise pass over the row (it is hot in L1/L2).
// The dx row kernel and dw live in rms_norm_common.h (shared with fused_add_rmsnorm.cu); dw is a column
// reduction, deterministic without atomics: per column, chunks of rows summed in double in row order, then
// the chunks in order.
// bfloat16 (Backend::native_bf16): x, w, y, g, dx, dw bfloat16 (S), rstd float32 (T = compute_t<S>, the
// statistic): every load widens exactly, the math is the float32 kernel's, each output is rounded once.
#include <cmath>
#include <type_traits>

#include "kernels/fused_args.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/rms_norm_common.h"
#include "kernels/cuda/row_group.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {
namespace {

using rms_norm_detail::launch_row_kernel;
using rms_norm_detail::launch_rms_norm_backward;

// ---- forward ----

// y [R, C], x [R, C], w [C], rstd [R] at their strides (column strides 1 when Contig).
template <class S, bool WarpRows, bool Contig, class T = cpu::compute_t<S>>
__global__ void rms_norm_kernel(S* TG_RESTRICT y, int64_t ys0, int64_t ys1, T* TG_RESTRICT rstd, int64_t rs,
                                const S* TG_RESTRICT x, int64_t xs0, int64_t xs1, const S* TG_RESTRICT w, int64_t ws,
                                int64_t R, int64_t C, double eps) {
  __shared__ double scratch[32];
  const RowGroup<WarpRows> group{};
  const int64_t oy = Contig ? 1 : ys1, ox = Contig ? 1 : xs1, ow = Contig ? 1 : ws;
  for (int64_t base = group.first_row(); base < R; base += group.row_step()) {
    const int64_t i = base + group.slot();
    const bool active = i < R;  // every thread still joins the reduction
    const S* xr = x + (active ? i : 0) * xs0;
    double ss = 0;
    if (active)
      for (int64_t j = group.rank(); j < C; j += group.size()) {
        const double v = double(T(xr[j * ox]));
        ss += v * v;
      }
    ss = group.sum(ss, scratch);
    if (!active) continue;
    const T r = T(1.0 / std::sqrt(ss / double(C) + eps));
    S* yr = y + i * ys0;
    for (int64_t j = group.rank(); j < C; j += group.size()) yr[j * oy] = S(T(xr[j * ox]) * r * T(w[j * ow]));
    if (group.rank() == 0) rstd[i * rs] = r;
  }
}

// ---- host side ----

// The statistic rstd's dtype: float32 for bfloat16 x, else x's (autograd/ops/op_util.h).
DType statistic_dtype(DType x) { return x == DType::BFloat16 ? DType::Float32 : x; }
// rstd as the shared checks (kernels/fused_args.h, of x's dtype) see it, once its own dtype is checked.
TensorView checked_rstd(const char* op, const TensorView& rstd, const TensorView& x) {
  TG_CHECK(rstd.dtype == statistic_dtype(x.dtype), "{}: rstd must be {} for {} x, got {}", op,
           statistic_dtype(x.dtype), x.dtype, rstd.dtype);
  TensorView as_x = rstd;
  as_x.dtype = x.dtype;
  return as_x;
}

}  // namespace

void CudaBackend::rms_norm(const TensorView& y, const TensorView& rstd, const TensorView& x, const TensorView& weight,
                           double eps) {
  const char* op = "rms_norm";
  check_rms_norm_args(op, x, weight, checked_rstd(op, rstd, x));
  TG_CHECK(y.shape == x.shape && y.dtype == x.dtype, "{}: y {} {} must match x {} {}", op, y.dtype, y.shape, x.dtype,
           x.shape);
  cpu::dispatch_floating_storage(x.dtype, op, [&](auto tag) {
    using S = decltype(tag);
    using T = cpu::compute_t<S>;
    const int64_t R = x.shape[0], C = x.shape[1];
    const bool contig = x.strides[1] == 1 && y.strides[1] == 1 && weight.strides[0] == 1;
    launch_row_kernel(R, C, contig, [&](auto warp_rows, auto contiguous, unsigned blocks, int threads) {
      constexpr bool W = decltype(warp_rows)::value, Ct = decltype(contiguous)::value;
      launch(rms_norm_kernel<S, W, Ct>, dim3(blocks), dim3(threads), 0, static_cast<S*>(y.data), y.strides[0],
             y.strides[1], static_cast<T*>(rstd.data), rstd.strides[0], static_cast<const S*>(x.data), x.strides[0],
             x.strides[1], static_cast<const S*>(weight.data), weight.strides[0], R, C, eps);
    });
  });
}

void CudaBackend::rms_norm_backward(const TensorView& grad_x, const TensorView& grad_weight, const TensorView& grad_y,
                                    const TensorView& x, const TensorView& weight, const TensorView& rstd) {
  const char* op = "rms_norm backward";
  check_rms_norm_backward_args(op, grad_x, grad_weight, grad_y, x, weight, checked_rstd(op, rstd, x));
  cpu::dispatch_floating_storage(x.dtype, op, [&](auto tag) {
    using S = decltype(tag);
    launch_rms_norm_backward<S, S>(*this, grad_x, grad_weight, grad_y, x, weight, rstd, TensorView{});
  });
}

}  // namespace tapegrad::kernels::cuda
