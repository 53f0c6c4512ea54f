// fused_adamw.cu — CUDA AdamW update of one parameter in one pass over (θ, g, m, v), in
// torch.optim.AdamW's order, exactly as the CPU kernel (kernels/cpu/fused_adamw.cpp):
//   θ ← θ·(1 − lr·λ)
//   m ← β1·m + (1 − β1)·g
//   v ← β2·v + (1 − β2)·g²
//   θ ← θ − lr/(1 − β1^t) · m / (√v / √(1 − β2^t) + ε)
// Every product and sum is rounded on its own (no FMA contraction: kernels/CMakeLists.txt compiles
// this file with --fmad=false under nvcc and -ffp-contract=off in the emulated build), and √ and ÷
// are IEEE correctly rounded in both, so the result is bit-identical to the CPU's.
// Elementwise: one thread per element, grid-stride loop, 256-thread blocks; all four tensors
// contiguous (the usual case) index directly, otherwise through an Indexer<4>.
// Many parameters at once (adamw_update_many, what optim::AdamW::step calls): one launch for all of
// them. Each parameter is cut into chunks of kChunk elements, one block per chunk; a table of the
// parameters (pointers, size, first chunk) is copied to the device (staged, asynchronous) and each
// block finds its parameter by binary search. The same adamw_element, so the same bits.
// A captured step (kernels/device_graph.h) replays with each step's lr and t: adamw_update_many_from_device
// reads AdamWStep's seven doubles from a device tensor when the kernel runs and rounds them to the
// parameter's dtype there, with the same operations the host does for adamw_update_many (derive_scalars:
// both sides uncontracted, ÷ and √ correctly rounded), so the two give the same bits.
#include <cmath>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/indexer.h"
#include "kernels/cuda/multi_tensor.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// The step's scalars in the parameter's dtype, rounded once on the host as the CPU does.
template <class T>
struct AdamWScalars {
  T keep;        // 1 − lr·λ (exactly 1 without weight decay)
  T beta1, beta2, one_minus_beta1, one_minus_beta2;
  T step_size;   // lr / bc1
  T sqrt_bc2;    // √bc2
  T eps;
};

__device__ inline float device_sqrt(float x) { return sqrtf(x); }
__device__ inline double device_sqrt(double x) { return sqrt(x); }

template <class T>
__device__ inline void adamw_element(const AdamWScalars<T>& s, T& p, T g, T& m, T& v) {
  m = m * s.beta1 + s.one_minus_beta1 * g;
  v = v * s.beta2 + s.one_minus_beta2 * (g * g);
  p = p * s.keep - s.step_size * (m / (device_sqrt(v) / s.sqrt_bc2 + s.eps));  // as torch: (√v / √bc2) + ε
}

template <class T>
__global__ void adamw_contiguous_kernel(T* TG_RESTRICT param, const T* TG_RESTRICT grad, T* TG_RESTRICT exp_avg,
                                        T* TG_RESTRICT exp_avg_sq, AdamWScalars<T> s, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    adamw_element(s, param[i], grad[i], exp_avg[i], exp_avg_sq[i]);
}

template <class T>
__global__ void adamw_strided_kernel(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, AdamWScalars<T> s,
                                     Indexer<4> ix, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[4];
    ix.offsets(i, off);
    adamw_element(s, param[off[0]], grad[off[1]], exp_avg[off[2]], exp_avg_sq[off[3]]);
  }
}

// One parameter in the table of adamw_many_kernel: its four contiguous tensors, n elements, and the
// index of its first chunk (chunks of all earlier parameters come first).
template <class T>
struct AdamWSlot {
  T* param;
  const T* grad;
  T* exp_avg;
  T* exp_avg_sq;
  int64_t n, first_chunk;
};
constexpr int64_t kChunk = kMultiTensorChunk;

// The step's scalars in dtype T from AdamWStep's doubles {lr, β1, β2, ε, λ, bc1, bc2}, rounded once each:
// the host's (adamw_update_many) and the device's (adamw_update_many_from_device) are this one function.
template <class T>
__host__ __device__ inline void derive_scalars(const double* st, AdamWScalars<T>* s) {
  const double lr = st[0], beta1 = st[1], beta2 = st[2], eps = st[3], weight_decay = st[4];
  const double bias_correction1 = st[5], bias_correction2 = st[6];
  s->keep = lr * weight_decay != 0.0 ? T(1.0 - lr * weight_decay) : T(1);  // p·1 is exact
  s->beta1 = T(beta1);
  s->beta2 = T(beta2);
  s->one_minus_beta1 = T(1.0 - beta1);
  s->one_minus_beta2 = T(1.0 - beta2);
  s->step_size = T(lr / bias_correction1);
  s->sqrt_bc2 = T(sqrt(bias_correction2));
  s->eps = T(eps);
}

// One chunk of the parameters of adamw_many_kernel's table (this block's).
template <class T>
__device__ inline void adamw_chunk(const AdamWSlot<T>* slots, int n_slots, const AdamWScalars<T>& s) {
  const int64_t chunk = blockIdx.x;
  const AdamWSlot<T>& t = slot_of_chunk(slots, n_slots, chunk);
  const int64_t begin = (chunk - t.first_chunk) * kChunk, end = begin + kChunk < t.n ? begin + kChunk : t.n;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    adamw_element(s, t.param[i], t.grad[i], t.exp_avg[i], t.exp_avg_sq[i]);
}

template <class T>
__global__ void adamw_many_kernel(const AdamWSlot<T>* slots, int n_slots, AdamWScalars<T> s) {
  adamw_chunk(slots, n_slots, s);
}

// The same with the scalars read from device memory (AdamWStep's seven doubles) when the kernel runs.
template <class T>
__global__ void adamw_many_from_device_kernel(const AdamWSlot<T>* slots, int n_slots, const double* step) {
  AdamWScalars<T> s;
  derive_scalars<T>(step, &s);
  adamw_chunk(slots, n_slots, s);
}

template <class T>
AdamWScalars<T> scalars_of(const AdamWStep& st) {
  const double v[7] = {st.lr, st.beta1, st.beta2, st.eps, st.weight_decay, st.bias_correction1, st.bias_correction2};
  AdamWScalars<T> s;
  derive_scalars<T>(v, &s);
  return s;
}

// All of `tensors` (contiguous, dtype T) in one launch; the scalars from `st`, or, when device_step is not
// null, from those seven doubles on the device.
template <class T>
void adamw_many_typed(CudaBackend& backend, const std::vector<AdamWTensors>& tensors, const AdamWStep& st,
                      const double* device_step = nullptr) {
  std::vector<AdamWSlot<T>> slots;
  int64_t chunks = 0;
  for (const AdamWTensors& t : tensors) {
    const int64_t n = t.param.numel();
    if (n == 0) continue;
    slots.push_back({static_cast<T*>(t.param.data), static_cast<const T*>(t.grad.data), static_cast<T*>(t.exp_avg.data),
                     static_cast<T*>(t.exp_avg_sq.data), n, chunks});
    chunks += multi_tensor_chunks(n);
  }
  if (slots.empty()) return;
  TG_CHECK(chunks <= int64_t(0x7fffffff) && slots.size() <= size_t(0x7fffffff),
           "adamw_update_many: {} chunks of {} parameters are too many for one launch", chunks, slots.size());
  // The table lives in a device block freed right after the launch: later users of the block are
  // ordered after the kernel on the one stream.
  const size_t bytes = slots.size() * sizeof(AdamWSlot<T>);
  const ScratchBuffer table(backend, bytes);
  backend.copy_from_host(table.as<void>(), slots.data(), bytes);
  if (device_step != nullptr)
    launch(adamw_many_from_device_kernel<T>, dim3(unsigned(chunks)), dim3(kThreads), 0,
           table.as<const AdamWSlot<T>>(), int(slots.size()), device_step);
  else
    launch(adamw_many_kernel<T>, dim3(unsigned(chunks)), dim3(kThreads), 0, table.as<const AdamWSlot<T>>(),
           int(slots.size()), scalars_of<T>(st));
}

template <class T>
void adamw_typed(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                 const TensorView& exp_avg_sq, const AdamWStep& st) {
  const int64_t n = param.numel();
  if (n == 0) return;
  const AdamWScalars<T> s = scalars_of<T>(st);
  T* p = static_cast<T*>(param.data);
  const T* g = static_cast<const T*>(grad.data);
  T* m = static_cast<T*>(exp_avg.data);
  T* v = static_cast<T*>(exp_avg_sq.data);
  const dim3 grid(blocks_for(n, kThreads)), block(kThreads);
  if (param.is_contiguous() && grad.is_contiguous() && exp_avg.is_contiguous() && exp_avg_sq.is_contiguous()) {
    launch(adamw_contiguous_kernel<T>, grid, block, 0, p, g, m, v, s, n);
  } else {
    const TensorView* const views[4] = {&param, &grad, &exp_avg, &exp_avg_sq};
    launch(adamw_strided_kernel<T>, grid, block, 0, p, g, m, v, s, make_indexer<4>(param.shape, views), n);
  }
}

void check_matching(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                    const TensorView& exp_avg_sq) {
  for (const TensorView* t : {&grad, &exp_avg, &exp_avg_sq})
    TG_CHECK(t->shape == param.shape && t->dtype == param.dtype,
             "adamw_update: tensors must match the parameter {} {}, got {} {}", param.dtype, param.shape, t->dtype,
             t->shape);
}

}  // namespace

void CudaBackend::adamw_update(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                               const TensorView& exp_avg_sq, const AdamWStep& step) {
  check_matching(param, grad, exp_avg, exp_avg_sq);
  switch (param.dtype) {
    case DType::Float32: return adamw_typed<float>(param, grad, exp_avg, exp_avg_sq, step);
    case DType::Float64: return adamw_typed<double>(param, grad, exp_avg, exp_avg_sq, step);
    default:
      throw Error(fmt::format("adamw_update: dtype {} is not supported (float32 or float64 expected)", param.dtype));
  }
}

void CudaBackend::adamw_update_many(const std::vector<AdamWTensors>& tensors, const AdamWStep& step) {
  // One launch when every tensor is contiguous and all share one float dtype; else one each.
  bool one_launch = !tensors.empty();
  for (const AdamWTensors& t : tensors) {
    check_matching(t.param, t.grad, t.exp_avg, t.exp_avg_sq);
    one_launch = one_launch && t.param.dtype == tensors.front().param.dtype && t.param.is_contiguous() &&
                 t.grad.is_contiguous() && t.exp_avg.is_contiguous() && t.exp_avg_sq.is_contiguous();
  }
  if (one_launch && tensors.front().param.dtype == DType::Float32) return adamw_many_typed<float>(*this, tensors, step);
  if (one_launch && tensors.front().param.dtype == DType::Float64) return adamw_many_typed<double>(*this, tensors, step);
  for (const AdamWTensors& t : tensors) adamw_update(t.param, t.grad, t.exp_avg, t.exp_avg_sq, step);
}

bool CudaBackend::adamw_update_many_from_device(const std::vector<AdamWTensors>& tensors,
                                                const TensorView& step) {
  TG_CHECK(step.dtype == DType::Float64 && step.numel() == 7 && step.is_contiguous(),
           "adamw_update_many_from_device: the step's scalars must be a contiguous float64 tensor of 7 elements, "
           "got {} {}",
           step.dtype, step.shape);
  if (tensors.empty()) return true;
  const DType dtype = tensors.front().param.dtype;
  for (const AdamWTensors& t : tensors) {
    check_matching(t.param, t.grad, t.exp_avg, t.exp_avg_sq);
    if (t.param.dtype != dtype || !t.param.is_contiguous() || !t.grad.is_contiguous() || !t.exp_avg.is_contiguous() ||
        !t.exp_avg_sq.is_contiguous())
      return false;
  }
  const auto* device_step = static_cast<const double*>(step.data);
  if (dtype == DType::Float32) adamw_many_typed<float>(*this, tensors, AdamWStep{}, device_step);
  else if (dtype == DType::Float64) adamw_many_typed<double>(*this, tensors, AdamWStep{}, device_step);
  else return false;
  return true;
}

}  // namespace tapegrad::kernels::cuda
