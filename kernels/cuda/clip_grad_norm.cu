// clip_grad_norm.cu — gradient clipping by the global L2 norm over all gradients in three launches,
// however many parameters there are (the composition in optim/clip_grad.cpp costs ~6 launches per
// parameter: ~700 for gpt2s, milliseconds of launch overhead per step):
//   n = √(Σ_tensors Σ_elements g²)      g² summed in float64
//   s = max_norm/(n + 1e-6) when max_norm < n < ∞, else 1      (NaN / ∞: nothing is scaled)
//   g ← g·s                              (s rounded to g's dtype first, as the composition does)
// Kernels, over a table of the gradients (pointer, size, first chunk; copied to the device, staged and
// asynchronous, as adamw_update_many does), each gradient cut into chunks of kChunk elements:
//   sum_squares_kernel  one block per chunk: its Σ g² (float64) into partial[chunk];
//   finish_kernel       one block: Σ partial in a fixed order → n and s (two float64 on the device);
//   scale_kernel        one block per chunk: g ← g·s; returns at once when s == 1 (the usual step).
// Fixed order everywhere (no atomics): the same gradients give the same bits every time. Nothing is
// read back on the host.
#include <cmath>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/multi_tensor.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kFinishThreads = 1024;
constexpr int64_t kChunk = kMultiTensorChunk;

// One gradient of the table: n contiguous elements, and the index of its first chunk.
template <class T>
struct GradSlot {
  T* data;
  int64_t n, first_chunk;
};

template <class T>
__global__ void sum_squares_kernel(const GradSlot<T>* slots, int n_slots, double* partial) {
  __shared__ double scratch[32];
  const GradSlot<T>& t = slot_of_chunk(slots, n_slots, blockIdx.x);
  const int64_t begin = (int64_t(blockIdx.x) - t.first_chunk) * kChunk;
  const int64_t end = begin + kChunk < t.n ? begin + kChunk : t.n;
  double s = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double g = static_cast<double>(t.data[i]);
    s += g * g;
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// out[0] = n, out[1] = s (see the header).
__global__ void finish_kernel(const double* partial, int64_t chunks, double max_norm, double* out) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) s += partial[c];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) {
    const double norm = sqrt(s);
    out[0] = norm;
    out[1] = norm > max_norm && norm < INFINITY ? max_norm / (norm + 1e-6) : 1.0;
  }
}

template <class T>
__global__ void scale_kernel(const GradSlot<T>* slots, int n_slots, const double* norm_and_scale) {
  const double scale = norm_and_scale[1];
  if (scale == 1.0) return;
  const T s = static_cast<T>(scale);
  const GradSlot<T>& t = slot_of_chunk(slots, n_slots, blockIdx.x);
  const int64_t begin = (int64_t(blockIdx.x) - t.first_chunk) * kChunk;
  const int64_t end = begin + kChunk < t.n ? begin + kChunk : t.n;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) t.data[i] = t.data[i] * s;
}

template <class T>
void clip_typed(CudaBackend& backend, const TensorView& norm, const std::vector<TensorView>& grads, double max_norm) {
  std::vector<GradSlot<T>> slots;
  int64_t chunks = 0;
  for (const TensorView& g : grads) {
    const int64_t n = g.numel();
    if (n == 0) continue;
    slots.push_back({static_cast<T*>(g.data), n, chunks});
    chunks += multi_tensor_chunks(n);
  }
  TG_CHECK(chunks <= int64_t(0x7fffffff) && slots.size() <= size_t(0x7fffffff),
           "clip_grad_norm: {} chunks of {} gradients are too many for one launch", chunks, slots.size());
  if (slots.empty()) {  // only empty gradients: n = 0, nothing to scale
    backend.fill(norm, 0.0);
    return;
  }
  const ScratchBuffer results(backend, 2 * sizeof(double));  // n, s
  // The table and the partial sums live in blocks freed right after the launches: later users of the
  // blocks are ordered after the kernels on the one stream.
  const size_t table_bytes = slots.size() * sizeof(GradSlot<T>);
  const ScratchBuffer table(backend, table_bytes), partial(backend, size_t(chunks) * sizeof(double));
  backend.copy_from_host(table.as<void>(), slots.data(), table_bytes);
  launch(sum_squares_kernel<T>, dim3(unsigned(chunks)), dim3(kThreads), 0, table.as<const GradSlot<T>>(),
         int(slots.size()), partial.as<double>());
  launch(finish_kernel, dim3(1), dim3(kFinishThreads), 0, partial.as<const double>(), chunks, max_norm,
         results.as<double>());
  launch(scale_kernel<T>, dim3(unsigned(chunks)), dim3(kThreads), 0, table.as<const GradSlot<T>>(),
         int(slots.size()), results.as<const double>());
  backend.copy(norm, TensorView{results.as<void>(), DType::Float64, Shape{}, Shape{}});
}

}  // namespace

bool CudaBackend::clip_grad_norm_native(const TensorView& norm, const std::vector<TensorView>& grads, double max_norm) {
  if (grads.empty() || norm.dtype != DType::Float64) return false;
  const DType dtype = grads.front().dtype;
  for (const TensorView& g : grads)
    if (g.dtype != dtype || !g.is_contiguous()) return false;
  if (dtype == DType::Float32)
    clip_typed<float>(*this, norm, grads, max_norm);
  else if (dtype == DType::Float64)
    clip_typed<double>(*this, norm, grads, max_norm);
  else
    return false;
  return true;
}

}  // namespace tapegrad::kernels::cuda
