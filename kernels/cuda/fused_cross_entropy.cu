// fused_cross_entropy.cu — CUDA fused cross-entropy over the rows of logits [N, V] (any strides;
// a unit column stride takes the fast path), targets [N] Int32/Int64.
//
// Forward, per row i with target t (rows whose target is ignore_index are skipped):
//   lse_i = log Σ_j exp(x_ij) (max subtracted),  loss_i = lse_i − x_it,  loss = Σ_valid loss_i / N_valid
// Kernel 1 (rows): a row group — one block for long rows, one warp for short ones (row_group.h) —
// reads its row once with an "online" softmax per thread: a running max m and Σ exp(x − m) (in
// double; each exp in the logits' type, as on the CPU), rescaled by exp(m_old − m_new) when the max
// grows; a thread loads kBatch elements at a time, so several loads are in flight. The group then
// takes M = max of the m's and S = Σ s·exp(m − M): lse = M + log S. It writes
// lse_i (float64) and loss_i into a temporary [N] buffer. A target outside [0, V) that is not
// ignore_index is reported through the device error record (thrown at the next synchronisation)
// and its row is not written.
// Kernel 2 (one block): Σ_valid loss_i in a fixed order (thread k takes rows k, k + 1024, ..., then
// a block reduction) and N_valid counted from the targets; loss = Σ / N_valid (NaN when N_valid is
// 0). Deterministic, and nothing is read back on the host.
//
// Backward, dx_ij = (exp(x_ij − lse_i) − [j = t_i])·g/N_valid (0 on ignored rows):
// Kernel 1 (one block) counts N_valid and forms scale = g/N_valid on the device (g read there);
// kernel 2 writes each row (a row group per row, as the forward). For float32, x − lse is formed
// as (x − hi) − lo with hi = float(lse), lo = float(lse − hi), exactly as the CPU backend does.
// grad_logits may alias logits (the gradient written over the saved logits): each x_ij is read once, by the
// thread that then writes dx_ij.
//
// bfloat16 logits (Backend::native_bf16) are read as they are — one pass, never a float32 [N, V] copy:
// S (Stored) is the storage type, T = compute_t<S> (float32) the type of every exp and of the loss and
// grad_loss (the float32 statistic, autograd/ops/op_util.h); lse stays float64. The backward reads the
// bfloat16 logits and writes bfloat16 grad_logits, each element rounded once. The values are the float32
// kernel's on the same logits: what the bf16 bridge computed with two extra passes and a float32 [N, V] copy.
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/row_group.h"
#include "kernels/cuda/runtime.h"
#include "kernels/unary_functors.h"

namespace tapegrad::kernels::cuda {
namespace {

constexpr int kShortRow = 256;      // rows up to this long get one warp each
constexpr int kWarpRowThreads = 128;  // 4 short rows per block
constexpr int kReduceThreads = 1024;  // the single block of the N_valid / mean kernels
constexpr int kBatch = 4;             // logits loaded per thread before they are summed

// A target is valid when it is not ignore_index and in [0, V).
__device__ inline bool target_in_range(int64_t t, int64_t V) { return t >= 0 && t < V; }

// ---- forward ----

// logits [N, V] at strides (row_stride, col_stride; col_stride == 1 when Contig).
template <class Stored, class Index, bool WarpRows, bool Contig, class T = cpu::compute_t<Stored>>
__global__ void cross_entropy_rows_kernel(double* TG_RESTRICT lse, int64_t lse_stride, double* TG_RESTRICT row_loss,
                                          const Stored* TG_RESTRICT logits, int64_t row_stride, int64_t col_stride,
                                          const Index* TG_RESTRICT targets, int64_t target_stride, int64_t N,
                                          int64_t V, int64_t ignore_index, DeviceErrorRecord* errors) {
  __shared__ double scratch[32];
  const RowGroup<WarpRows> group{};
  const int64_t cs = Contig ? 1 : col_stride;
  const double inf = std::numeric_limits<double>::infinity();
  const T tinf = std::numeric_limits<T>::infinity();
  for (int64_t base = group.first_row(); base < N; base += group.row_step()) {
    const int64_t i = base + group.slot();
    const bool active = i < N;
    const int64_t t = active ? static_cast<int64_t>(targets[i * target_stride]) : ignore_index;
    const bool valid = active && t != ignore_index && target_in_range(t, V);
    const Stored* row = logits + (active ? i : 0) * row_stride;
    // This thread's share: running max m and s = Σ exp(x − m), taken kBatch elements at a time (their
    // loads are in flight together; −inf pads the last batch). −inf adds nothing; NaN makes s NaN.
    T m = -tinf;
    double s = 0;
    if (valid) {
      const int64_t step = group.size();
      for (int64_t j0 = group.rank(); j0 < V; j0 += kBatch * step) {
        T v[kBatch];
        for (int u = 0; u < kBatch; ++u) v[u] = j0 + u * step < V ? T(row[(j0 + u * step) * cs]) : -tinf;
        T batch_max = -tinf;  // max of the batch, skipping NaN
        for (int u = 0; u < kBatch; ++u) batch_max = v[u] > batch_max ? v[u] : batch_max;
        if (batch_max > m) {  // a new running max: rescale what was summed (s·0 = 0 when m was −inf)
          s *= std::exp(double(m) - double(batch_max));
          m = batch_max;
        }
        for (int u = 0; u < kBatch; ++u) s += v[u] == -tinf ? 0.0 : double(fn::exp_(v[u] - m));
      }
    }
    // Combine the threads: M = max m (never NaN), S = Σ s·exp(m − M).
    const double M = group.max(double(m), scratch, -inf);
    const double part = double(m) == -inf ? s : s * std::exp(double(m) - M);
    const double S = group.sum(part, scratch);
    if (active && group.rank() == 0) {
      if (valid) {
        // NaN anywhere → NaN; every x = −inf → −inf; a +inf → NaN (inf − inf), like the CPU.
        double l;
        if (S != S || M == inf)
          l = std::numeric_limits<double>::quiet_NaN();
        else if (M == -inf)
          l = -inf;
        else
          l = M + std::log(S);
        lse[i * lse_stride] = l;
        row_loss[i] = l - double(T(row[t * cs]));
      } else {
        row_loss[i] = 0.0;
        if (t == ignore_index)
          lse[i * lse_stride] = 0.0;
        else
          report_bad_index(errors, DeviceErrorCode::CrossEntropyTarget, t, V, i);
      }
    }
  }
}

// N_valid of targets [N], counted by one block (as a double: exact below 2^53); every thread gets it.
template <class Index>
__device__ double count_valid_targets(const Index* targets, int64_t target_stride, int64_t N, int64_t V,
                                      int64_t ignore_index, double* scratch) {
  double count = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    const int64_t t = static_cast<int64_t>(targets[i * target_stride]);
    if (t != ignore_index && target_in_range(t, V)) count += 1.0;
  }
  return block_sum(count, scratch);
}

// loss = Σ_i row_loss_i / N_valid, one block; thread k sums rows k, k + blockDim.x, ... (a fixed order).
template <class T, class Index>
__global__ void cross_entropy_mean_kernel(T* loss, const double* TG_RESTRICT row_loss,
                                          const Index* TG_RESTRICT targets, int64_t target_stride, int64_t N,
                                          int64_t V, int64_t ignore_index) {
  __shared__ double scratch[32];
  double total = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) total += row_loss[i];
  total = block_sum(total, scratch);
  const double valid = count_valid_targets(targets, target_stride, N, V, ignore_index, scratch);
  if (threadIdx.x == 0) *loss = T(total / valid);  // 0/0 = NaN when no row is valid
}

// ---- backward ----

// scale = g / N_valid in T, like the CPU: T(double(g) / N_valid).
template <class T, class Index>
__global__ void cross_entropy_scale_kernel(T* scale, const T* grad_loss, const Index* TG_RESTRICT targets,
                                           int64_t target_stride, int64_t N, int64_t V, int64_t ignore_index) {
  __shared__ double scratch[32];
  const double valid = count_valid_targets(targets, target_stride, N, V, ignore_index, scratch);
  if (threadIdx.x == 0) *scale = T(double(*grad_loss) / valid);
}

// dx_ij = exp((x_ij − hi) − lo)·scale − [j = t_i]·scale on valid rows, 0 on ignored rows.
// dx may be the logits' own buffer (autograd/ops/fused.cpp writes the gradient in place): the thread that writes
// dx_ij has read x_ij just before, and no other thread touches either, so dx and logits are not TG_RESTRICT.
template <class S, class Index, bool WarpRows, bool Contig, class T = cpu::compute_t<S>>
__global__ void cross_entropy_backward_kernel(S* dx, int64_t dx_row_stride, int64_t dx_col_stride,
                                              const S* logits, int64_t row_stride, int64_t col_stride,
                                              const Index* TG_RESTRICT targets, int64_t target_stride,
                                              const double* TG_RESTRICT lse, int64_t lse_stride, const T* scale_ptr,
                                              int64_t N, int64_t V, int64_t ignore_index,
                                              DeviceErrorRecord* errors) {
  const RowGroup<WarpRows> group{};
  const int64_t cs = Contig ? 1 : col_stride, dcs = Contig ? 1 : dx_col_stride;
  const T scale = *scale_ptr;
  for (int64_t base = group.first_row(); base < N; base += group.row_step()) {
    const int64_t i = base + group.slot();
    if (i >= N) continue;  // no barrier or shuffle in this kernel: groups may skip
    const int64_t t = static_cast<int64_t>(targets[i * target_stride]);
    S* drow = dx + i * dx_row_stride;
    if (t == ignore_index) {
      for (int64_t j = group.rank(); j < V; j += group.size()) drow[j * dcs] = S(T(0));
      continue;
    }
    if (!target_in_range(t, V)) {
      if (group.rank() == 0) report_bad_index(errors, DeviceErrorCode::CrossEntropyTarget, t, V, i);
      continue;
    }
    const S* row = logits + i * row_stride;
    const double l = lse[i * lse_stride];
    const T hi = T(l), lo = T(l - double(hi));
    for (int64_t j = group.rank(); j < V; j += group.size()) {
      T d = fn::exp_((T(row[j * cs]) - hi) - lo) * scale;
      if (j == t) d -= scale;
      drow[j * dcs] = S(d);
    }
  }
}

// ---- host side ----

// Checks the views like the CPU backend (the target values are checked by the kernels).
void check_views(const char* op, const TensorView& logits, const TensorView& targets, const TensorView& lse) {
  TG_CHECK(logits.ndim() == 2, "{}: logits must be [N, V], got {}", op, logits.shape);
  TG_CHECK(targets.ndim() == 1 && targets.shape[0] == logits.shape[0],
           "{}: targets {} must be [N] for logits {}", op, targets.shape, logits.shape);
  TG_CHECK(targets.dtype == DType::Int64 || targets.dtype == DType::Int32,
           "{}: targets must be int64 or int32, got {}", op, targets.dtype);
  TG_CHECK(lse.ndim() == 1 && lse.shape[0] == logits.shape[0] && lse.dtype == DType::Float64,
           "{}: lse must be float64 [N], got {} {}", op, lse.dtype, lse.shape);
}

// The dtype of the loss and grad_loss: float32 for bfloat16 logits (autograd/ops/op_util.h), else the logits'.
DType statistic_dtype(DType logits) { return logits == DType::BFloat16 ? DType::Float32 : logits; }

// Calls f(Index{}) with the C++ type of the targets.
template <class F>
void dispatch_index(DType t, F&& f) {
  if (t == DType::Int64)
    f(int64_t{});
  else
    f(int32_t{});
}

// Launches a row kernel in the mapping that fits V: a warp per row for short rows, else a block
// (256 threads; 512 for rows of 8192 and more) per row.
template <bool WarpRows, class Launch>
void launch_rows(int64_t N, int64_t V, Launch&& go) {
  if constexpr (WarpRows) {
    go(row_blocks(N, kWarpRowThreads / 32), kWarpRowThreads);
  } else {
    go(row_blocks(N, 1), threads_for_row(V, V >= 8192 ? 512 : 256));
  }
}

}  // namespace

void CudaBackend::cross_entropy(const TensorView& loss, const TensorView& lse, const TensorView& logits,
                                const TensorView& targets, int64_t ignore_index) {
  const char* op = "cross_entropy";
  check_views(op, logits, targets, lse);
  const DType stat = statistic_dtype(logits.dtype);
  TG_CHECK(loss.numel() == 1 && loss.dtype == stat, "{}: loss must be one {} element", op, stat);
  const int64_t N = logits.shape[0], V = logits.shape[1];
  ScratchBuffer row_loss(*this, static_cast<size_t>(N) * sizeof(double));
  cpu::dispatch_floating_storage(logits.dtype, op, [&](auto tag) {
    using S = decltype(tag);
    using T = cpu::compute_t<S>;
    dispatch_index(targets.dtype, [&](auto index_tag) {
      using Index = decltype(index_tag);
      const S* x = static_cast<const S*>(logits.data);
      const Index* tp = static_cast<const Index*>(targets.data);
      double* lp = static_cast<double*>(lse.data);
      const int64_t rs = logits.strides[0], cs = logits.strides[1], ts = targets.strides[0], ls = lse.strides[0];
      auto rows = [&](auto warp_rows, auto contig) {
        constexpr bool W = decltype(warp_rows)::value, C = decltype(contig)::value;
        launch_rows<W>(N, V, [&](unsigned blocks, int threads) {
          launch(cross_entropy_rows_kernel<S, Index, W, C>, dim3(blocks), dim3(threads), 0, lp, ls,
                 row_loss.as<double>(), x, rs, cs, tp, ts, N, V, ignore_index, device_error_record());
        });
      };
      const bool short_rows = V <= kShortRow;
      if (cs == 1) {
        if (short_rows) rows(std::true_type{}, std::true_type{});
        else rows(std::false_type{}, std::true_type{});
      } else {
        if (short_rows) rows(std::true_type{}, std::false_type{});
        else rows(std::false_type{}, std::false_type{});
      }
      // Always launched (also for N = 0: the loss is then NaN, as on the CPU).
      launch(cross_entropy_mean_kernel<T, Index>, dim3(1), dim3(kReduceThreads), 0, static_cast<T*>(loss.data),
             row_loss.as<double>(), tp, ts, N, V, ignore_index);
    });
  });
}

void CudaBackend::cross_entropy_backward(const TensorView& grad_logits, const TensorView& grad_loss,
                                         const TensorView& logits, const TensorView& targets, const TensorView& lse,
                                         int64_t ignore_index) {
  const char* op = "cross_entropy backward";
  check_views(op, logits, targets, lse);
  TG_CHECK(grad_logits.shape == logits.shape && grad_logits.dtype == logits.dtype,
           "{}: grad_logits {} {} must match logits {} {}", op, grad_logits.dtype, grad_logits.shape, logits.dtype,
           logits.shape);
  const DType stat = statistic_dtype(logits.dtype);
  TG_CHECK(grad_loss.numel() == 1 && grad_loss.dtype == stat, "{}: grad_loss must be one {} element", op, stat);
  const int64_t N = logits.shape[0], V = logits.shape[1];
  if (N == 0) return;
  cpu::dispatch_floating_storage(logits.dtype, op, [&](auto tag) {
    using S = decltype(tag);
    using T = cpu::compute_t<S>;
    ScratchBuffer scale(*this, sizeof(T));
    dispatch_index(targets.dtype, [&](auto index_tag) {
      using Index = decltype(index_tag);
      const S* x = static_cast<const S*>(logits.data);
      S* dx = static_cast<S*>(grad_logits.data);
      const Index* tp = static_cast<const Index*>(targets.data);
      const double* lp = static_cast<const double*>(lse.data);
      const int64_t rs = logits.strides[0], cs = logits.strides[1], ts = targets.strides[0], ls = lse.strides[0];
      const int64_t drs = grad_logits.strides[0], dcs = grad_logits.strides[1];
      launch(cross_entropy_scale_kernel<T, Index>, dim3(1), dim3(kReduceThreads), 0, scale.as<T>(),
             static_cast<const T*>(grad_loss.data), tp, ts, N, V, ignore_index);
      auto rows = [&](auto warp_rows, auto contig) {
        constexpr bool W = decltype(warp_rows)::value, C = decltype(contig)::value;
        launch_rows<W>(N, V, [&](unsigned blocks, int threads) {
          launch(cross_entropy_backward_kernel<S, Index, W, C>, dim3(blocks), dim3(threads), 0, dx, drs, dcs, x, rs,
                 cs, tp, ts, lp, ls, scale.as<T>(), N, V, ignore_index, device_error_record());
        });
      };
      const bool short_rows = V <= kShortRow;
      if (cs == 1 && dcs == 1) {
        if (short_rows) rows(std::true_type{}, std::true_type{});
        else rows(std::false_type{}, std::true_type{});
      } else {
        if (short_rows) rows(std::true_type{}, std::false_type{});
        else rows(std::false_type{}, std::false_type{});
      }
    });
  });
}

}  // namespace tapegrad::kernels::cuda
