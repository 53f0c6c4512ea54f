// softmax.cpp — CPU softmax / log-softmax along one dim, and their backward from the output.
//
// Per row (every index of the other dims):  m = max x;  s = Σ exp(x − m)
//   softmax:      y = exp(x − m) / s
//   log_softmax:  y = x − m − log s
// Subtracting the max keeps exp ≤ 1, so inputs of ±1e4 neither overflow nor produce NaN.
// Backward (g = dL/dy):
//   softmax:      dx = y ⊙ (g − Σ g⊙y)
//   log_softmax:  dx = g − exp(y) ⊙ Σ g
#include <cmath>

#include "kernels/cpu/simd_extremum.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/nd_loop.h"
#include "kernels/cpu/parallel.h"
#include "kernels/unary_functors.h"

namespace tapegrad::kernels::cpu {
namespace {

// Runs row(ptrs, strides) for every row along `dim` of the views (all of the same shape).
template <int N, class Row>
void for_each_row(const Shape& shape, int dim, const std::array<const TensorView*, N>& views, Row row) {
  Shape outer = shape;
  outer[dim] = 1;
  auto loop = make_loop<N>(outer, views);
  const int64_t len = shape[dim];
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, len));
  parallel_for(loop.numel(), grain, [&](int64_t b, int64_t e) {
    loop.run(b, e, [&](char** p, int64_t n, const int64_t* s) {
      for (int64_t i = 0; i < n; ++i) {
        std::array<char*, N> q;
        for (int k = 0; k < N; ++k) q[k] = p[k] + i * s[k];
        row(q);
      }
    });
  });
}

}  // namespace

void CpuBackend::softmax(const TensorView& out, const TensorView& in, int dim, bool log) {
  dispatch_floating(in.dtype, log ? "log_softmax" : "softmax", [&](auto t) {
    using T = decltype(t);
    const int64_t len = in.shape[dim];
    const int64_t so = out.strides[dim], si = in.strides[dim];
    for_each_row<2>(in.shape, dim, {&out, &in}, [&](std::array<char*, 2> p) {
      T* y = reinterpret_cast<T*>(p[0]);
      const T* x = reinterpret_cast<const T*>(p[1]);
      if (si == 1 && so == 1) {  // contiguous row: vectorized passes
        T m = -std::numeric_limits<T>::infinity();
        bool nan = false;
#pragma omp simd reduction(max : m) reduction(|| : nan)
        for (int64_t j = 0; j < len; ++j) {
          m = x[j] > m ? x[j] : m;
          nan = nan || x[j] != x[j];
        }
        m = fix_simd_max(m, -std::numeric_limits<T>::infinity(), len, [&](int64_t j) { return x[j]; });
        if (nan) m = std::numeric_limits<T>::quiet_NaN();
        double s = 0;
        if (log) {
#pragma omp simd reduction(+ : s)
          for (int64_t j = 0; j < len; ++j) s += double(fn::exp_(x[j] - m));
          const T shift = m + T(std::log(s));
#pragma omp simd
          for (int64_t j = 0; j < len; ++j) y[j] = x[j] - shift;
        } else {
#pragma omp simd reduction(+ : s)
          for (int64_t j = 0; j < len; ++j) {
            y[j] = fn::exp_(x[j] - m);
            s += double(y[j]);
          }
          const T inv = T(1.0 / s);
#pragma omp simd
          for (int64_t j = 0; j < len; ++j) y[j] *= inv;
        }
        return;
      }
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < len; ++j) m = std::max(m, x[j * si]);
      double s = 0;
      if (log) {
        for (int64_t j = 0; j < len; ++j) s += std::exp(x[j * si] - m);
        const T shift = m + T(std::log(s));
        for (int64_t j = 0; j < len; ++j) y[j * so] = x[j * si] - shift;
      } else {
        for (int64_t j = 0; j < len; ++j) {
          const T e = std::exp(x[j * si] - m);
          y[j * so] = e;
          s += e;
        }
        const T inv = T(1.0 / s);
        for (int64_t j = 0; j < len; ++j) y[j * so] *= inv;
      }
    });
  });
}

void CpuBackend::softmax_backward(const TensorView& grad_in, const TensorView& grad_out, const TensorView& y,
                                  int dim, bool log) {
  dispatch_floating(y.dtype, log ? "log_softmax backward" : "softmax backward", [&](auto t) {
    using T = decltype(t);
    const int64_t len = y.shape[dim];
    const int64_t sgi = grad_in.strides[dim], sgo = grad_out.strides[dim], sy = y.strides[dim];
    for_each_row<3>(y.shape, dim, {&grad_in, &grad_out, &y}, [&](std::array<char*, 3> p) {
      T* gx = reinterpret_cast<T*>(p[0]);
      const T* g = reinterpret_cast<const T*>(p[1]);
      const T* yv = reinterpret_cast<const T*>(p[2]);
      double dot = 0;
      if (sgi == 1 && sgo == 1 && sy == 1) {  // contiguous row: vectorized passes
        if (log) {
#pragma omp simd reduction(+ : dot)
          for (int64_t j = 0; j < len; ++j) dot += double(g[j]);
#pragma omp simd
          for (int64_t j = 0; j < len; ++j) gx[j] = g[j] - fn::exp_(yv[j]) * T(dot);
        } else {
#pragma omp simd reduction(+ : dot)
          for (int64_t j = 0; j < len; ++j) dot += double(g[j]) * double(yv[j]);
#pragma omp simd
          for (int64_t j = 0; j < len; ++j) gx[j] = yv[j] * (g[j] - T(dot));
        }
        return;
      }
      if (log) {
        for (int64_t j = 0; j < len; ++j) dot += g[j * sgo];
        for (int64_t j = 0; j < len; ++j) gx[j * sgi] = g[j * sgo] - std::exp(yv[j * sy]) * T(dot);
      } else {
        for (int64_t j = 0; j < len; ++j) dot += double(g[j * sgo]) * yv[j * sy];
        for (int64_t j = 0; j < len; ++j) gx[j * sgi] = yv[j * sy] * (g[j * sgo] - T(dot));
      }
    });
  });
}

}  // namespace tapegrad::kernels::cpu
