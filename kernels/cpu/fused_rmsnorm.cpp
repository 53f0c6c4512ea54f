// fused_rmsnorm.cpp — CPU fused RMSNorm over the rows of x [R, C], weight w [C].
//
// Forward, per row:   r = 1/sqrt(mean_j x_j² + eps)   (Σ x² accumulated in double)
//                     y_j = x_j·r·w_j,   rstd_row = r  (saved for backward)
// Backward (g = dL/dy, gw = g⊙w); since ∂r/∂x_k = −r³·x_k/C:
//   dx_k = gw_k·r + Σ_j gw_j·x_j·(−r³·x_k/C) = r·(gw_k − x_k·r²·mean_j(gw_j·x_j))
//   dw_j = Σ_rows g_j·x_j·r
// dw is a reduction over rows: the rows are cut into a fixed number of blocks (from the shape, not
// the thread count), each block sums its rows into its own double accumulator row, and the blocks
// are then added in order — the same bits for any thread count.
// Fused with the residual stream (backend.h: add_rms_norm, rms_norm_backward_add):
//   forward   h = x + branch (stored), then the norm of h as stored: one pass instead of add + norm;
//   backward  grad_x = grad_residual + dx: the gradient already gathered for h gets dx added in the same
//             pass, instead of dx written out and a separate add reading both back.
// Float32 and float64 here (the bf16 bridge hands bfloat16 calls over as float32).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/fused_args.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/parallel.h"

namespace tapegrad::kernels::cpu {
namespace {

int64_t grain_rows(int64_t C) { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, C)); }

// Forward of one row (Contig: unit column strides everywhere).
template <class T, bool Contig>
T row_forward(T* y, int64_t sy, const T* x, int64_t sx, const T* w, int64_t sw, int64_t C, double eps) {
  const int64_t oy = Contig ? 1 : sy, ox = Contig ? 1 : sx, ow = Contig ? 1 : sw;
  double ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t j = 0; j < C; ++j) ss += double(x[j * ox]) * double(x[j * ox]);
  const T r = T(1.0 / std::sqrt(ss / double(C) + eps));
#pragma omp simd
  for (int64_t j = 0; j < C; ++j) y[j * oy] = x[j * ox] * r * w[j * ow];
  return r;
}

// dx of one row:  dx_k = r·gw_k − x_k·(r³·mean(gw⊙x)); with a residual row res (stride sres):
// dx_k = res_k + that (the term rounded to T first, as a separate add would see it). res may be dx.
template <class T, bool Contig>
void row_backward_x(T* dx, int64_t sdx, const T* g, int64_t sg, const T* x, int64_t sx, const T* w, int64_t sw,
                    int64_t C, T r, const T* res = nullptr, int64_t sres = 0) {
  const int64_t od = Contig ? 1 : sdx, og = Contig ? 1 : sg, ox = Contig ? 1 : sx, ow = Contig ? 1 : sw;
  double dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < C; ++j) dot += double(g[j * og] * w[j * ow]) * double(x[j * ox]);
  const double rd = double(r);
  const T k = T(rd * rd * rd * dot / double(C));
  if (res == nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < C; ++j) dx[j * od] = r * (g[j * og] * w[j * ow]) - x[j * ox] * k;
  } else {
    const int64_t oresid = Contig ? 1 : sres;
    for (int64_t j = 0; j < C; ++j) {
      const T term = r * (g[j * og] * w[j * ow]) - x[j * ox] * k;
      dx[j * od] = res[j * oresid] + term;
    }
  }
}

// acc_j += g_j·x_j·r over one row.
template <class T, bool Contig>
void row_backward_w(double* acc, const T* g, int64_t sg, const T* x, int64_t sx, int64_t C, T r) {
  const int64_t og = Contig ? 1 : sg, ox = Contig ? 1 : sx;
  const double rd = double(r);
#pragma omp simd
  for (int64_t j = 0; j < C; ++j) acc[j] += double(g[j * og]) * double(x[j * ox]) * rd;
}

}  // namespace

void CpuBackend::rms_norm(const TensorView& y, const TensorView& rstd, const TensorView& x, const TensorView& weight,
                          double eps) {
  const char* op = "rms_norm";
  check_rms_norm_args(op, x, weight, rstd);
  TG_CHECK(y.shape == x.shape && y.dtype == x.dtype, "{}: y {} {} must match x {} {}", op, y.dtype, y.shape, x.dtype,
           x.shape);
  dispatch_floating(x.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const int64_t R = x.shape[0], C = x.shape[1];
    const bool contig = x.strides[1] == 1 && y.strides[1] == 1 && weight.strides[0] == 1;
    const T* xp = static_cast<const T*>(x.data);
    const T* wp = static_cast<const T*>(weight.data);
    T* yp = static_cast<T*>(y.data);
    T* rp = static_cast<T*>(rstd.data);
    parallel_for(R, grain_rows(C), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T* xr = xp + i * x.strides[0];
        T* yr = yp + i * y.strides[0];
        rp[i * rstd.strides[0]] =
            contig ? row_forward<T, true>(yr, 1, xr, 1, wp, 1, C, eps)
                   : row_forward<T, false>(yr, y.strides[1], xr, x.strides[1], wp, weight.strides[0], C, eps);
      }
    });
  });
}

void CpuBackend::add_rms_norm(const TensorView& h, const TensorView& y, const TensorView& rstd, const TensorView& x,
                              const TensorView& branch, const TensorView& weight, double eps) {
  const char* op = "add_rms_norm";
  check_add_rms_norm_args(op, h, y, rstd, x, branch, weight);
  TG_CHECK(branch.dtype == x.dtype && y.dtype == x.dtype,
           "{}: branch {} and y {} must be x's dtype {} here (bfloat16 goes through the bf16 bridge)", op,
           branch.dtype, y.dtype, x.dtype);
  dispatch_floating(x.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const int64_t R = x.shape[0], C = x.shape[1];
    // The add's and the norm's operands each decide their own loop: the norm then runs exactly rms_norm's loop
    // over h (a vectorized sum is ordered by the loop's form, so the same form gives the same bits).
    const bool add_contig = x.strides[1] == 1 && branch.strides[1] == 1 && h.strides[1] == 1;
    const bool contig = h.strides[1] == 1 && y.strides[1] == 1 && weight.strides[0] == 1;
    const T* xp = static_cast<const T*>(x.data);
    const T* bp = static_cast<const T*>(branch.data);
    const T* wp = static_cast<const T*>(weight.data);
    T* hp = static_cast<T*>(h.data);
    T* yp = static_cast<T*>(y.data);
    T* rp = static_cast<T*>(rstd.data);
    parallel_for(R, grain_rows(C), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T* xr = xp + i * x.strides[0];
        const T* br = bp + i * branch.strides[0];
        T* hr = hp + i * h.strides[0];
        // h = x + branch, stored; the norm then reads the row back while it is in L1.
        const int64_t oh = add_contig ? 1 : h.strides[1], ox = add_contig ? 1 : x.strides[1];
        const int64_t ob = add_contig ? 1 : branch.strides[1];
        for (int64_t j = 0; j < C; ++j) hr[j * oh] = xr[j * ox] + br[j * ob];
        T* yr = yp + i * y.strides[0];
        rp[i * rstd.strides[0]] =
            contig ? row_forward<T, true>(yr, 1, hr, 1, wp, 1, C, eps)
                   : row_forward<T, false>(yr, y.strides[1], hr, h.strides[1], wp, weight.strides[0], C, eps);
      }
    });
  });
}

namespace {

// rms_norm_backward, its dx added onto grad_residual's rows when that is present (it may be grad_x).
void rms_norm_backward_rows(const char* op, const TensorView& grad_x, const TensorView& grad_weight,
                            const TensorView& grad_y, const TensorView& x, const TensorView& weight,
                            const TensorView& rstd, const TensorView& grad_residual) {
  const bool want_x = grad_x.data != nullptr, want_w = grad_weight.data != nullptr;
  dispatch_floating(x.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const int64_t R = x.shape[0], C = x.shape[1];
    const T* xp = static_cast<const T*>(x.data);
    const T* gp = static_cast<const T*>(grad_y.data);
    const T* wp = static_cast<const T*>(weight.data);
    const T* rp = static_cast<const T*>(rstd.data);
    T* dxp = static_cast<T*>(grad_x.data);
    const T* resp = static_cast<const T*>(grad_residual.data);
    const bool contig = x.strides[1] == 1 && grad_y.strides[1] == 1 && weight.strides[0] == 1 &&
                        (!want_x || grad_x.strides[1] == 1) && (resp == nullptr || grad_residual.strides[1] == 1);
    // Row blocks: about kElementwiseGrain elements each, at most 64, at least 1; fixed by the shape.
    const int64_t blocks = R == 0 ? 0 : std::clamp<int64_t>(R * C / kElementwiseGrain, 1, std::min<int64_t>(64, R));
    std::vector<double> partial(want_w ? static_cast<size_t>(blocks * C) : 0, 0.0);
    parallel_for(blocks, 1, [&](int64_t bb, int64_t be) {
      for (int64_t blk = bb; blk < be; ++blk) {
        const int64_t r0 = R * blk / blocks, r1 = R * (blk + 1) / blocks;
        double* acc = want_w ? partial.data() + blk * C : nullptr;
        for (int64_t i = r0; i < r1; ++i) {
          const T* xr = xp + i * x.strides[0];
          const T* gr = gp + i * grad_y.strides[0];
          const T r = rp[i * rstd.strides[0]];
          if (contig) {
            if (want_x)
              row_backward_x<T, true>(dxp + i * grad_x.strides[0], 1, gr, 1, xr, 1, wp, 1, C, r,
                                      resp ? resp + i * grad_residual.strides[0] : nullptr, 1);
            if (want_w) row_backward_w<T, true>(acc, gr, 1, xr, 1, C, r);
          } else {
            if (want_x)
              row_backward_x<T, false>(dxp + i * grad_x.strides[0], grad_x.strides[1], gr, grad_y.strides[1], xr,
                                       x.strides[1], wp, weight.strides[0], C, r,
                                       resp ? resp + i * grad_residual.strides[0] : nullptr,
                                       resp ? grad_residual.strides[1] : 0);
            if (want_w) row_backward_w<T, false>(acc, gr, grad_y.strides[1], xr, x.strides[1], C, r);
          }
        }
      }
    });
    if (want_w) {
      T* dw = static_cast<T*>(grad_weight.data);
      for (int64_t j = 0; j < C; ++j) {
        double s = 0;
        for (int64_t blk = 0; blk < blocks; ++blk) s += partial[static_cast<size_t>(blk * C + j)];
        dw[j * grad_weight.strides[0]] = T(s);
      }
    }
  });
}

}  // namespace

void CpuBackend::rms_norm_backward(const TensorView& grad_x, const TensorView& grad_weight, const TensorView& grad_y,
                                   const TensorView& x, const TensorView& weight, const TensorView& rstd) {
  const char* op = "rms_norm backward";
  check_rms_norm_backward_args(op, grad_x, grad_weight, grad_y, x, weight, rstd);
  rms_norm_backward_rows(op, grad_x, grad_weight, grad_y, x, weight, rstd, TensorView{});
}

void CpuBackend::rms_norm_backward_add(const TensorView& grad_x, const TensorView& grad_weight,
                                       const TensorView& grad_y, const TensorView& x, const TensorView& weight,
                                       const TensorView& rstd, const TensorView& grad_residual) {
  const char* op = "rms_norm_backward_add";
  check_rms_norm_backward_add_args(op, grad_x, grad_weight, grad_y, x, weight, rstd, grad_residual);
  TG_CHECK(grad_y.dtype == x.dtype, "{}: grad_y {} must be x's dtype {} here (bfloat16 goes through the bf16 bridge)",
           op, grad_y.dtype, x.dtype);
  rms_norm_backward_rows(op, grad_x, grad_weight, grad_y, x, weight, rstd, grad_residual);
}

}  // namespace tapegrad::kernels::cpu
