// rms_norm_common.h — what the two CUDA RMSNorm files share (fused_rmsnorm.cu: rms_norm and its backward;
// fused_add_rmsnorm.cu: the residual add fused in): the choice of row kernel, the dx row kernel, the weight
// gradient, and the launch of a whole backward (launch_rms_norm_backward).
//
// Row kernels: one row group per row (row_group.h) — a warp for rows of up to kShortRow elements (4 rows per
// 128-thread block), else a block of up to 256 threads. launch_row_kernel picks the group and the column
// stride path (Contig: unit column strides everywhere) from the shape and strides.
// Weight gradient  dw_j = Σ_rows g_j·x_j·r  (written, not accumulated), deterministic without atomics:
// kernel A, grid (column tiles, row chunks), gives each thread one column and one chunk of rows, summed in
// double in row order into partial [chunks, C]; kernel B sums the chunks of each column in order and writes
// dw (with a single chunk, kernel A writes dw itself). The chunking depends only on the shape.
// Types: S stores x and dw, G stores g (S or bfloat16, widened on load), T = compute_t<S> stores rstd.
// Internal to the CUDA backend; included only by .cu files.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/row_group.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda::rms_norm_detail {

constexpr int kShortRow = 256;         // rows up to this long get one warp each
constexpr int kWarpRowThreads = 128;   // 4 short rows per block
constexpr int kRowThreads = 256;       // threads of a block that owns one long row
constexpr int kColumnThreads = 256;    // columns per block of the dw kernels
constexpr int64_t kMinChunkRows = 16;  // rows per dw chunk, at least
constexpr int64_t kTargetDwBlocks = 1024;

// Calls f(WarpRows, Contig, blocks, threads), the first two as std::integral_constants, with the grid and
// block of the row kernels for R rows of C elements.
template <class F>
void launch_row_kernel(int64_t R, int64_t C, bool contig, F&& f) {
  const bool short_rows = C <= kShortRow;
  const unsigned warp_blocks = row_blocks(R, kWarpRowThreads / 32), block_blocks = row_blocks(R, 1);
  const int block_threads = threads_for_row(C, kRowThreads);
  if (short_rows) {
    if (contig) f(std::true_type{}, std::true_type{}, warp_blocks, kWarpRowThreads);
    else f(std::true_type{}, std::false_type{}, warp_blocks, kWarpRowThreads);
  } else {
    if (contig) f(std::false_type{}, std::true_type{}, block_blocks, block_threads);
    else f(std::false_type{}, std::false_type{}, block_blocks, block_threads);
  }
}

// The dx rows of rms_norm_backward (res == nullptr) and of rms_norm_backward_add (res: grad_residual, any view
// of x's shape, grad_x itself allowed — hence no restrict on either):
//   dx_k = r·gw_k − x_k·(r³·mean_j(gw_j·x_j)),  gw = g⊙w,  stored as X(dx_k) or X(T(res_k) + dx_k).
// grad_x [R, C] (strides ds*), g [R, C] (G: X or bfloat16), x [R, C], w [C], rstd [R].
template <class X, class G, bool WarpRows, bool Contig, class T = cpu::compute_t<X>>
__global__ void rms_norm_backward_x_kernel(X* dx, int64_t ds0, int64_t ds1, const X* res, int64_t res0, int64_t res1,
                                           const G* TG_RESTRICT g, int64_t gs0, int64_t gs1, const X* TG_RESTRICT x,
                                           int64_t xs0, int64_t xs1, const X* TG_RESTRICT w, int64_t ws,
                                           const T* TG_RESTRICT rstd, int64_t rs, int64_t R, int64_t C) {
  __shared__ double scratch[32];
  const RowGroup<WarpRows> group{};
  const int64_t od = Contig ? 1 : ds1, ores = Contig ? 1 : res1, og = Contig ? 1 : gs1, ox = Contig ? 1 : xs1;
  const int64_t ow = Contig ? 1 : ws;
  for (int64_t base = group.first_row(); base < R; base += group.row_step()) {
    const int64_t i = base + group.slot();
    const bool active = i < R;
    const int64_t row = active ? i : 0;
    const X* xr = x + row * xs0;
    const G* gr = g + row * gs0;
    double dot = 0;  // Σ_j gw_j·x_j
    if (active)
      for (int64_t j = group.rank(); j < C; j += group.size())
        dot += double(T(gr[j * og]) * T(w[j * ow])) * double(T(xr[j * ox]));
    dot = group.sum(dot, scratch);
    if (!active) continue;
    const T r = rstd[i * rs];
    const double rd = double(r);
    const T k = T(rd * rd * rd * dot / double(C));  // r³·mean(gw⊙x)
    X* dr = dx + i * ds0;
    if (res == nullptr) {
      for (int64_t j = group.rank(); j < C; j += group.size())
        dr[j * od] = X(r * (T(gr[j * og]) * T(w[j * ow])) - T(xr[j * ox]) * k);
    } else {
      const X* resr = res + i * res0;
      for (int64_t j = group.rank(); j < C; j += group.size()) {
        const T d = r * (T(gr[j * og]) * T(w[j * ow])) - T(xr[j * ox]) * k;
        dr[j * od] = X(T(resr[j * ores]) + d);
      }
    }
  }
}

// Block (column tile blockIdx.x, row chunk blockIdx.y): one column per thread, the chunk's rows in
// order. With one chunk the sum is the result (written to dw), else it goes to partial [chunks, C].
template <class S, class G, bool Contig, class T = cpu::compute_t<S>>
__global__ void rms_norm_backward_w_kernel(S* TG_RESTRICT dw, int64_t dws, double* TG_RESTRICT partial,
                                           const G* TG_RESTRICT g, int64_t gs0, int64_t gs1, const S* TG_RESTRICT x,
                                           int64_t xs0, int64_t xs1, const T* TG_RESTRICT rstd, int64_t rs, int64_t R,
                                           int64_t C, int64_t chunk_rows) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= C) return;
  const int64_t og = Contig ? 1 : gs1, ox = Contig ? 1 : xs1;
  const int64_t r0 = int64_t(blockIdx.y) * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < R ? r0 + chunk_rows : R;
  double acc = 0;
  for (int64_t i = r0; i < r1; ++i)
    acc += double(T(g[i * gs0 + j * og])) * double(T(x[i * xs0 + j * ox])) * double(rstd[i * rs]);
  if (gridDim.y == 1)
    dw[j * dws] = S(T(acc));
  else
    partial[int64_t(blockIdx.y) * C + j] = acc;
}

// dw_j = Σ_c partial[c, j] in chunk order (0 when there are no rows).
template <class S, class T = cpu::compute_t<S>>
__global__ void rms_norm_sum_chunks_kernel(S* TG_RESTRICT dw, int64_t dws, const double* TG_RESTRICT partial,
                                           int64_t chunks, int64_t C) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < C; j += int64_t(gridDim.x) * blockDim.x) {
    double s = 0;
    for (int64_t c = 0; c < chunks; ++c) s += partial[c * C + j];
    dw[j * dws] = S(T(s));
  }
}

// Queues dw [C] (stride dws) = Σ_rows g⊙x·r for g, x [R, C] at their strides and rstd [R]; no host sync.
template <class S, class G, class T = cpu::compute_t<S>>
void launch_weight_grad(Backend& backend, S* dw, int64_t dws, const G* g, int64_t gs0, int64_t gs1, const S* x,
                        int64_t xs0, int64_t xs1, const T* rstd, int64_t rs, int64_t R, int64_t C) {
  if (C == 0) return;
  const int threads = threads_for_row(C, kColumnThreads);
  const int64_t column_blocks = (C + threads - 1) / threads;
  // Row chunks: enough blocks to fill the GPU, at least kMinChunkRows rows each; from the shape only.
  int64_t chunks = kTargetDwBlocks / column_blocks;
  const int64_t max_chunks = (R + kMinChunkRows - 1) / kMinChunkRows;
  chunks = chunks < 1 ? 1 : (chunks > max_chunks ? max_chunks : chunks);
  if (R == 0) {  // no rows: dw = 0
    launch(rms_norm_sum_chunks_kernel<S>, dim3(blocks_for(C, threads)), dim3(threads), 0, dw, dws,
           static_cast<const double*>(nullptr), int64_t{0}, C);
    return;
  }
  const int64_t chunk_rows = (R + chunks - 1) / chunks;
  chunks = (R + chunk_rows - 1) / chunk_rows;  // no empty chunk at the end
  ScratchBuffer partial(backend, chunks > 1 ? static_cast<size_t>(chunks * C) * sizeof(double) : 0);
  const bool contig = xs1 == 1 && gs1 == 1;
  const dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(chunks));
  if (contig)
    launch(rms_norm_backward_w_kernel<S, G, true>, grid, dim3(threads), 0, dw, dws, partial.as<double>(), g, gs0, gs1,
           x, xs0, xs1, rstd, rs, R, C, chunk_rows);
  else
    launch(rms_norm_backward_w_kernel<S, G, false>, grid, dim3(threads), 0, dw, dws, partial.as<double>(), g, gs0,
           gs1, x, xs0, xs1, rstd, rs, R, C, chunk_rows);
  if (chunks > 1)
    launch(rms_norm_sum_chunks_kernel<S>, dim3(blocks_for(C, threads)), dim3(threads), 0, dw, dws,
           static_cast<const double*>(partial.as<double>()), chunks, C);
}

// Queues an RMSNorm backward for views checked by the caller: grad_x when present (its data != nullptr), plus
// grad_residual when that is present (rms_norm_backward_add; may be grad_x itself), and grad_weight when present.
// X stores x, weight and the outputs, G stores grad_y. No host sync.
template <class X, class G>
void launch_rms_norm_backward(Backend& backend, const TensorView& grad_x, const TensorView& grad_weight,
                              const TensorView& grad_y, const TensorView& x, const TensorView& weight,
                              const TensorView& rstd, const TensorView& grad_residual) {
  using T = cpu::compute_t<X>;
  const int64_t R = x.shape[0], C = x.shape[1];
  const X* xp = static_cast<const X*>(x.data);
  const G* gp = static_cast<const G*>(grad_y.data);
  const T* rp = static_cast<const T*>(rstd.data);
  if (grad_x.data != nullptr) {
    const X* resp = static_cast<const X*>(grad_residual.data);
    const bool contig = x.strides[1] == 1 && grad_y.strides[1] == 1 && weight.strides[0] == 1 &&
                        grad_x.strides[1] == 1 && (resp == nullptr || grad_residual.strides[1] == 1);
    const int64_t res0 = resp ? grad_residual.strides[0] : 0, res1 = resp ? grad_residual.strides[1] : 0;
    launch_row_kernel(R, C, contig, [&](auto warp_rows, auto contiguous, unsigned blocks, int threads) {
      constexpr bool W = decltype(warp_rows)::value, Ct = decltype(contiguous)::value;
      launch(rms_norm_backward_x_kernel<X, G, W, Ct>, dim3(blocks), dim3(threads), 0, static_cast<X*>(grad_x.data),
             grad_x.strides[0], grad_x.strides[1], resp, res0, res1, gp, grad_y.strides[0], grad_y.strides[1], xp,
             x.strides[0], x.strides[1], static_cast<const X*>(weight.data), weight.strides[0], rp, rstd.strides[0],
             R, C);
    });
  }
  if (grad_weight.data != nullptr)
    launch_weight_grad(backend, static_cast<X*>(grad_weight.data), grad_weight.strides[0], gp, grad_y.strides[0],
                       grad_y.strides[1], xp, x.strides[0], x.strides[1], rp, rstd.strides[0], R, C);
}

}  // namespace tapegrad::kernels::cuda::rms_norm_detail
