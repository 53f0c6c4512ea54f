// softmax.cu — CUDA softmax / log-softmax along one dim (any strides), and their backward from the
// output y.
//
// A row is every element along `dim` for one index of the other dims. A group of lanes handles a
// row (kernels/cuda/rows.h: a whole block for long contiguous rows, a few threads for short ones,
// adjacent rows on adjacent threads when `dim` is not the fastest-moving dim, so reads coalesce):
//   forward:  m = max_j x_j;  s = Σ_j exp(x_j − m)  (double, as the CPU);  then
//             softmax y_j = exp(x_j − m) · (1/s),   log_softmax y_j = x_j − (m + log s)
//   backward (g = dL/dy):  softmax dx = y ⊙ (g − Σ g⊙y),   log_softmax dx = g − exp(y) ⊙ Σ g
// Each Σ / max is a register loop over the lane's part of the row and a group_reduce in shared
// memory. The input is read three times (max, sum, write); a row stays in L1/L2 between passes.
// A row holding NaN or +∞, or only −∞, comes out all NaN, as on the CPU.
// bfloat16 (Backend::native_bf16): S is the storage type, T = compute_t<S> (float32) the type of the math;
// each loaded element widens exactly and each output is rounded once on the store (as the bf16 bridge).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/indexer.h"
#include "kernels/cuda/rows.h"
#include "kernels/cuda/runtime.h"
#include "kernels/unary_functors.h"

namespace tapegrad::kernels::cuda {
namespace {

struct MaxOp {  // NaN-propagating max
  __device__ static double combine(double a, double b) { return (b > a || b != b) ? b : a; }
};
struct SumOp {
  __device__ static double combine(double a, double b) { return a + b; }
};

// Rows of N operands of one shape: row index → each operand's row start, and the stride along dim.
template <int N>
struct Rows {
  Indexer<N> starts;
  int64_t stride[N];
  int64_t n_rows = 0, len = 0;
  RowMap map;
};

template <int N>
Rows<N> make_rows(const TensorView* const (&views)[N], int dim) {
  const TensorView& first = *views[0];
  Rows<N> r;
  Shape outer = first.shape;
  outer[dim] = 1;
  r.starts = make_indexer<N>(outer, views);
  for (int k = 0; k < N; ++k) r.stride[k] = views[k]->strides[dim];
  r.n_rows = outer.numel();
  r.len = first.shape[dim];
  // Rows are contiguous when dim is the fastest-moving dim of the last operand (the one read most).
  const TensorView& lead = *views[N - 1];
  int fastest = -1;
  for (int d = 0; d < lead.ndim(); ++d) {
    if (lead.shape[d] == 1) continue;
    if (fastest < 0 || std::abs(lead.strides[d]) < std::abs(lead.strides[fastest])) fastest = d;
  }
  r.map = plan_rows(r.n_rows, r.len, fastest < 0 || fastest == dim);
  return r;
}

// out = softmax(in) or log_softmax(in) along the rows (operand 0: out, 1: in).
template <class S, class T = cpu::compute_t<S>>
__global__ void softmax_kernel(Rows<2> g, S* out, const S* in, bool log) {
  __shared__ double scratch[kRowThreads];
  const int row_in_block = g.map.row_of(threadIdx.x), lane = g.map.lane_of(threadIdx.x);
  const bool narrow = narrow_index(g.n_rows);
  const int64_t so = g.stride[0], si = g.stride[1];
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * g.map.rows; first < g.n_rows;
       first += static_cast<int64_t>(gridDim.x) * g.map.rows) {
    const int64_t row = first + row_in_block;
    const bool active = row < g.n_rows;
    int64_t off[2] = {0, 0};
    if (active) element_offsets(g.starts, row, narrow, off);
    S* y = out + off[0];
    const S* x = in + off[1];

    T m = -std::numeric_limits<T>::infinity();
    if (active)
      for (int64_t j = lane; j < g.len; j += g.map.lanes) {
        const T v = T(x[j * si]);
        m = (v > m || v != v) ? v : m;
      }
    m = static_cast<T>(group_reduce<MaxOp>(static_cast<double>(m), scratch, g.map));

    double s = 0;
    if (active)
      for (int64_t j = lane; j < g.len; j += g.map.lanes) s += static_cast<double>(fn::exp_(T(x[j * si]) - m));
    s = group_reduce<SumOp>(s, scratch, g.map);

    if (!active) continue;
    if (log) {
      const T shift = m + static_cast<T>(std::log(s));
      for (int64_t j = lane; j < g.len; j += g.map.lanes) y[j * so] = S(T(x[j * si]) - shift);
    } else {
      const T inv = static_cast<T>(1.0 / s);
      for (int64_t j = lane; j < g.len; j += g.map.lanes) y[j * so] = S(fn::exp_(T(x[j * si]) - m) * inv);
    }
  }
}

// grad_in from grad_out and y along the rows (operand 0: grad_in, 1: grad_out, 2: y).
template <class S, class T = cpu::compute_t<S>>
__global__ void softmax_backward_kernel(Rows<3> g, S* grad_in, const S* grad_out, const S* out, bool log) {
  __shared__ double scratch[kRowThreads];
  const int row_in_block = g.map.row_of(threadIdx.x), lane = g.map.lane_of(threadIdx.x);
  const bool narrow = narrow_index(g.n_rows);
  const int64_t sgi = g.stride[0], sgo = g.stride[1], sy = g.stride[2];
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * g.map.rows; first < g.n_rows;
       first += static_cast<int64_t>(gridDim.x) * g.map.rows) {
    const int64_t row = first + row_in_block;
    const bool active = row < g.n_rows;
    int64_t off[3] = {0, 0, 0};
    if (active) element_offsets(g.starts, row, narrow, off);
    S* dx = grad_in + off[0];
    const S* gy = grad_out + off[1];
    const S* y = out + off[2];

    // log_softmax: Σ g;  softmax: Σ g⊙y
    double dot = 0;
    if (active)
      for (int64_t j = lane; j < g.len; j += g.map.lanes)
        dot += log ? static_cast<double>(T(gy[j * sgo]))
                   : static_cast<double>(T(gy[j * sgo])) * static_cast<double>(T(y[j * sy]));
    const T total = static_cast<T>(group_reduce<SumOp>(dot, scratch, g.map));

    if (!active) continue;
    if (log) {
      for (int64_t j = lane; j < g.len; j += g.map.lanes) dx[j * sgi] = S(T(gy[j * sgo]) - fn::exp_(T(y[j * sy])) * total);
    } else {
      for (int64_t j = lane; j < g.len; j += g.map.lanes) dx[j * sgi] = S(T(y[j * sy]) * (T(gy[j * sgo]) - total));
    }
  }
}

unsigned row_blocks(int64_t n_rows, const RowMap& map) {
  return static_cast<unsigned>(std::min<int64_t>((n_rows + map.rows - 1) / map.rows, 65535));
}

}  // namespace

void CudaBackend::softmax(const TensorView& out, const TensorView& in, int dim, bool log) {
  cpu::dispatch_floating_storage(in.dtype, log ? "log_softmax" : "softmax", [&](auto t) {
    using T = decltype(t);  // the storage type
    TG_CHECK(out.dtype == in.dtype, "{}: out {} must be in's dtype {}", log ? "log_softmax" : "softmax", out.dtype,
             in.dtype);
    const TensorView* const views[2] = {&out, &in};
    const Rows<2> rows = make_rows<2>(views, dim);
    if (rows.n_rows == 0 || rows.len == 0) return;
    launch(softmax_kernel<T>, row_blocks(rows.n_rows, rows.map), kRowThreads, 0, rows, static_cast<T*>(out.data),
           static_cast<const T*>(in.data), log);
  });
}

void CudaBackend::softmax_backward(const TensorView& grad_in, const TensorView& grad_out, const TensorView& y, int dim,
                                   bool log) {
  const char* op = log ? "log_softmax backward" : "softmax backward";
  cpu::dispatch_floating_storage(y.dtype, op, [&](auto t) {
    using T = decltype(t);  // the storage type
    TG_CHECK(grad_in.dtype == y.dtype && grad_out.dtype == y.dtype, "{}: grad_in {} and grad_out {} must be y's dtype {}",
             op, grad_in.dtype, grad_out.dtype, y.dtype);
    const TensorView* const views[3] = {&grad_in, &grad_out, &y};
    const Rows<3> rows = make_rows<3>(views, dim);
    if (rows.n_rows == 0 || rows.len == 0) return;
    launch(softmax_backward_kernel<T>, row_blocks(rows.n_rows, rows.map), kRowThreads, 0, rows,
           static_cast<T*>(grad_in.data), static_cast<const T*>(grad_out.data), static_cast<const T*>(y.data), log);
  });
}

}  // namespace tapegrad::kernels::cuda
