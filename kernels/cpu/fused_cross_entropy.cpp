// fused_cross_entropy.cpp — CPU fused cross-entropy over the rows of logits [N, V]: forward and
// backward each touch a row once (one read; the backward one read + one write).
//
// Forward, per row i with target t = t_i (rows whose target is ignore_index are skipped):
//   m = max_j x_j,  s = Σ_j exp(x_j − m),  lse_i = m + log s,  loss_i = lse_i − x_t
//   loss = Σ_valid loss_i / N_valid                       (NaN when no row is valid: 0/0)
// The row is read once: it is walked in chunks of kChunk; each chunk's max is taken, and when it
// exceeds the running max m the running sum is rescaled, s ← s·exp(m_old − m_new) ("online"
// softmax, per chunk instead of per element, so there is one exp per element). The chunk is hot
// in L1 for its exp pass. Float32 rows: exp(x − m) ≤ 1 is summed in float over sub-chunks of
// kSubChunk elements (16 lanes × 16 terms: rounding stays ~1e-7 relative), each sub-sum added to
// a double; lse and loss_i are formed in double. Subtracting the max first makes ±1e4 logits safe.
//
// Backward (g = dL/dloss, a scalar; only the per-row lse is saved, in float64):
//   dx_j = (softmax(x)_j − [j = t])·g/N_valid = (exp(x_j − lse) − [j = t])·g/N_valid;  0 on ignored rows
// For float32, x − lse is formed as (x − hi) − lo with hi = float(lse), lo = float(lse − hi): for
// the x near the row max (the ones whose exp matters) x − hi is exact, so logits of 1e4 keep a
// full-precision softmax even though float(lse) alone would be off by up to 5e-4.
// grad_logits may be the logits' own buffer (autograd/ops/fused.cpp writes the gradient in place): each x_j is
// read once, just before dx_j is written, so keep every loop that way (no pointer here is restrict).
//
// Every target is checked (0 ≤ t < V or t = ignore_index) before anything is written.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/simd_extremum.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/parallel.h"
#include "kernels/unary_functors.h"

namespace tapegrad::kernels::cpu {
namespace {

constexpr int64_t kChunk = 2048;    // elements per online-max step (8 KiB of float32)
constexpr int64_t kSubChunk = 256;  // elements per float partial sum

// Checks the views and every target; returns the number of valid rows (target ≠ ignore_index).
int64_t check_targets(const char* op, const TensorView& logits, const TensorView& targets, int64_t ignore_index) {
  TG_CHECK(logits.ndim() == 2, "{}: logits must be [N, V], got {}", op, logits.shape);
  TG_CHECK(targets.ndim() == 1 && targets.shape[0] == logits.shape[0],
           "{}: targets {} must be [N] for logits {}", op, targets.shape, logits.shape);
  TG_CHECK(targets.dtype == DType::Int64 || targets.dtype == DType::Int32,
           "{}: targets must be int64 or int32, got {}", op, targets.dtype);
  const int64_t N = logits.shape[0], V = logits.shape[1];
  const int64_t step = targets.strides[0] * static_cast<int64_t>(dtype_size(targets.dtype));
  int64_t valid = 0;
  for (int64_t i = 0; i < N; ++i) {
    const int64_t t = read_index(targets.data, targets.dtype, i * step);
    if (t == ignore_index) continue;
    TG_CHECK(t >= 0 && t < V, "{}: target {} of row {} is out of range [0, {}) (ignore_index {})", op, t, i, V,
             ignore_index);
    ++valid;
  }
  return valid;
}

int64_t grain_rows(int64_t V) { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, V)); }

// log Σ_j exp(x_j) of one row of V elements at stride st (1 when Contig), in double.
template <class T, bool Contig>
double row_logsumexp(const T* x, int64_t V, int64_t sx) {
  const int64_t st = Contig ? 1 : sx;
  T m = -std::numeric_limits<T>::infinity();
  double s = 0;
  for (int64_t c0 = 0; c0 < V; c0 += kChunk) {
    const int64_t n = std::min(kChunk, V - c0);
    const T* xc = x + c0 * st;
    // The chunk max skips NaN (a NaN in the row still makes exp(x − m), and so s, NaN below).
    T cm = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : cm)
    for (int64_t j = 0; j < n; ++j) cm = xc[j * st] > cm ? xc[j * st] : cm;
    cm = fix_simd_max(cm, -std::numeric_limits<T>::infinity(), n, [&](int64_t j) { return xc[j * st]; });
    if (cm > m) {  // new running max: rescale what was summed so far
      if (s != 0) s *= std::exp(double(m) - double(cm));
      m = cm;
    }
    if (m == -std::numeric_limits<T>::infinity()) {  // every x so far is −inf (adds 0) or NaN
      for (int64_t j = 0; j < n; ++j)
        if (xc[j * st] != xc[j * st]) return std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    for (int64_t b0 = 0; b0 < n; b0 += kSubChunk) {
      const int64_t nb = std::min(kSubChunk, n - b0);
      const T* xb = xc + b0 * st;
      T cs = 0;
#pragma omp simd reduction(+ : cs)
      for (int64_t j = 0; j < nb; ++j) cs += fn::exp_(xb[j * st] - m);
      s += double(cs);
    }
  }
  if (m == -std::numeric_limits<T>::infinity()) return -std::numeric_limits<double>::infinity();  // all −inf
  return double(m) + std::log(s);  // m = +inf gives NaN through s (inf − inf), like the composition
}

// dx_j = (exp(x_j − lse) − [j = t])·scale for one valid row.
template <class T, bool Contig>
void row_backward(T* dx, int64_t sdx, const T* x, int64_t sx, int64_t V, int64_t t, double lse, T scale) {
  const int64_t so = Contig ? 1 : sdx, si = Contig ? 1 : sx;
  const T hi = T(lse), lo = T(lse - double(hi));
#pragma omp simd
  for (int64_t j = 0; j < V; ++j) dx[j * so] = fn::exp_((x[j * si] - hi) - lo) * scale;
  dx[t * so] -= scale;
}

}  // namespace

void CpuBackend::cross_entropy(const TensorView& loss, const TensorView& lse, const TensorView& logits,
                               const TensorView& targets, int64_t ignore_index) {
  const char* op = "cross_entropy";
  const int64_t valid = check_targets(op, logits, targets, ignore_index);
  TG_CHECK(loss.numel() == 1 && loss.dtype == logits.dtype, "{}: loss must be one {} element", op, logits.dtype);
  TG_CHECK(lse.ndim() == 1 && lse.shape[0] == logits.shape[0] && lse.dtype == DType::Float64,
           "{}: lse must be float64 [N], got {} {}", op, lse.dtype, lse.shape);
  dispatch_floating(logits.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const int64_t N = logits.shape[0], V = logits.shape[1];
    const int64_t rs = logits.strides[0], cs = logits.strides[1];
    const int64_t tstep = targets.strides[0] * static_cast<int64_t>(dtype_size(targets.dtype));
    const T* x = static_cast<const T*>(logits.data);
    double* out_lse = static_cast<double*>(lse.data);
    const int64_t ls = lse.strides[0];
    std::vector<double> row_loss(static_cast<size_t>(N), 0.0);
    parallel_for(N, grain_rows(V), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t t = read_index(targets.data, targets.dtype, i * tstep);
        if (t == ignore_index) {
          out_lse[i * ls] = 0.0;
          continue;
        }
        const T* row = x + i * rs;
        const double l = cs == 1 ? row_logsumexp<T, true>(row, V, 1) : row_logsumexp<T, false>(row, V, cs);
        out_lse[i * ls] = l;
        row_loss[static_cast<size_t>(i)] = l - double(row[t * cs]);
      }
    });
    double total = 0;  // in row order: the same result for any thread count
    for (double v : row_loss) total += v;
    *static_cast<T*>(loss.data) = T(total / static_cast<double>(valid));  // 0/0 = NaN when none is valid
  });
}

void CpuBackend::cross_entropy_backward(const TensorView& grad_logits, const TensorView& grad_loss,
                                        const TensorView& logits, const TensorView& targets, const TensorView& lse,
                                        int64_t ignore_index) {
  const char* op = "cross_entropy backward";
  const int64_t valid = check_targets(op, logits, targets, ignore_index);
  TG_CHECK(grad_logits.shape == logits.shape && grad_logits.dtype == logits.dtype,
           "{}: grad_logits {} {} must match logits {} {}", op, grad_logits.dtype, grad_logits.shape, logits.dtype,
           logits.shape);
  TG_CHECK(grad_loss.numel() == 1 && grad_loss.dtype == logits.dtype, "{}: grad_loss must be one {} element", op,
           logits.dtype);
  TG_CHECK(lse.ndim() == 1 && lse.shape[0] == logits.shape[0] && lse.dtype == DType::Float64,
           "{}: lse must be float64 [N], got {} {}", op, lse.dtype, lse.shape);
  dispatch_floating(logits.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const int64_t N = logits.shape[0], V = logits.shape[1];
    const int64_t rs = logits.strides[0], cs = logits.strides[1];
    const int64_t grs = grad_logits.strides[0], gcs = grad_logits.strides[1];
    const int64_t tstep = targets.strides[0] * static_cast<int64_t>(dtype_size(targets.dtype));
    const T* x = static_cast<const T*>(logits.data);
    T* dx = static_cast<T*>(grad_logits.data);
    const double* in_lse = static_cast<const double*>(lse.data);
    const int64_t ls = lse.strides[0];
    const T scale = T(double(*static_cast<const T*>(grad_loss.data)) / static_cast<double>(valid));
    parallel_for(N, grain_rows(V), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t t = read_index(targets.data, targets.dtype, i * tstep);
        T* drow = dx + i * grs;
        if (t == ignore_index) {
          for (int64_t j = 0; j < V; ++j) drow[j * gcs] = T(0);
          continue;
        }
        const T* row = x + i * rs;
        if (cs == 1 && gcs == 1)
          row_backward<T, true>(drow, 1, row, 1, V, t, in_lse[i * ls], scale);
        else
          row_backward<T, false>(drow, gcs, row, cs, V, t, in_lse[i * ls], scale);
      }
    });
  });
}

}  // namespace tapegrad::kernels::cpu
