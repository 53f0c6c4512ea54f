// cuda_backend.h — the CUDA backend: cuBLAS for matmul, our own kernels (kernels/cuda/*.cu) for the
// rest. This header has no CUDA types, so registry.cpp (plain C++) can include it.
//
// Built two ways from the same sources: by nvcc for a real GPU (TAPEGRAD_CUDA), or as host C++ on
// HIP-CPU (TAPEGRAD_CUDA_EMULATED), where "device memory" is host memory, kernels run on host
// threads, and matmul runs our own tiled kernel instead of cuBLAS. See kernels/cuda/runtime.h.
//
// Ordering: every kernel, copy and cuBLAS call goes to one stream (runtime.h: stream()), so a
// freed block can be handed out again at once — later work on the stream runs after the earlier
// work that used it. Synchronisations (a device→host copy, synchronize()) are counted, so a test
// can check that a training step performs none.
#pragma once
#include <cstdint>

#include "kernels/backend.h"

namespace tapegrad::kernels::cuda {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device_index) : index_(device_index) {}
  Device device() const override { return Device::cuda(index_); }

  void* allocate(size_t nbytes) override;
  void deallocate(void* p, size_t nbytes) override;
  void copy_from_host(void* dst, const void* src, size_t nbytes) override;
  void copy_to_host(void* dst, const void* src, size_t nbytes) override;
  void copy_on_device(void* dst, const void* src, size_t nbytes) override;
  void synchronize() override;

  void fill(const TensorView& out, double value) override;
  void copy(const TensorView& out, const TensorView& in) override;
  void unary(UnaryOp op, const TensorView& out, const TensorView& in, double param) override;
  void unary_backward(UnaryOp op, const TensorView& grad_in, const TensorView& grad_out, const TensorView& x,
                      const TensorView& y, double param) override;
  void binary(BinaryOp op, const TensorView& out, const TensorView& a, const TensorView& b) override;
  void where(const TensorView& out, const TensorView& cond, const TensorView& a, const TensorView& b) override;

  void reduce(ReduceOp op, const TensorView& out, const TensorView& in) override;
  void max_along(const TensorView& values, const TensorView& indices, const TensorView& in, int dim) override;
  void softmax(const TensorView& out, const TensorView& in, int dim, bool log) override;
  void softmax_backward(const TensorView& grad_in, const TensorView& grad_out, const TensorView& y, int dim,
                        bool log) override;

  void matmul(const TensorView& out, const TensorView& a, const TensorView& b, bool accumulate) override;
  // cuBLAS bf16 GEMM (tensor cores, float32 accumulation) under nvcc with the cuBLAS matmul; false in the
  // emulated build and under TAPEGRAD_CUDA_MATMUL=simt (the bridge then runs the float32 SIMT kernel).
  bool matmul_bf16_native(const TensorView& out, const TensorView& a, const TensorView& b, bool accumulate) override;
  // The functions whose kernels read and write bfloat16 themselves (float32 inside, each output rounded
  // once): the bf16 bridge hands them their bfloat16 calls untouched (backend.h: native_bf16). One case per
  // function; tests/cuda/test_cuda_bf16.cpp checks each against the CPU's bridge.
  bool native_bf16(BackendFunction f) const override {
    switch (f) {
      case BackendFunction::Unary:
      case BackendFunction::UnaryBackward:
      case BackendFunction::Binary:
      case BackendFunction::Where:
      case BackendFunction::Softmax:
      case BackendFunction::SoftmaxBackward:
      case BackendFunction::CrossEntropy:
      case BackendFunction::CrossEntropyBackward:
      case BackendFunction::RmsNorm:
      case BackendFunction::RmsNormBackward:
      case BackendFunction::AddRmsNorm:          // fused_add_rmsnorm.cu: also a float32 stream with a bf16
      case BackendFunction::RmsNormBackwardAdd:  // branch, y or grad_y (the mixed-precision block)
      case BackendFunction::Swiglu:
      case BackendFunction::SwigluBackward:
      case BackendFunction::Rope:
      case BackendFunction::CausalAttention:          // fused_attention.cu: tensor cores (flash_attention_tc.cu)
      case BackendFunction::CausalAttentionBackward:  // for D 32/64/128 on sm_80+, else the SIMT kernels on bf16
        return true;
      default:
        return false;
    }
  }

  void index_select(const TensorView& out, const TensorView& in, int dim, const TensorView& index) override;
  void index_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) override;
  void gather(const TensorView& out, const TensorView& in, int dim, const TensorView& index) override;
  void scatter_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) override;
  // kernels/cuda/index_copy.cu: any dtype (bfloat16 moved as is), no host read of the index (capturable).
  void index_copy(const TensorView& out, int dim, const TensorView& index, const TensorView& src) override;

  void cross_entropy(const TensorView& loss, const TensorView& lse, const TensorView& logits,
                     const TensorView& targets, int64_t ignore_index) override;
  void cross_entropy_backward(const TensorView& grad_logits, const TensorView& grad_loss, const TensorView& logits,
                              const TensorView& targets, const TensorView& lse, int64_t ignore_index) override;
  void rms_norm(const TensorView& y, const TensorView& rstd, const TensorView& x, const TensorView& weight,
                double eps) override;
  void rms_norm_backward(const TensorView& grad_x, const TensorView& grad_weight, const TensorView& grad_y,
                         const TensorView& x, const TensorView& weight, const TensorView& rstd) override;
  // fused_add_rmsnorm.cu: the residual add and the norm in one pass (and the backward's add onto grad_residual).
  void add_rms_norm(const TensorView& h, const TensorView& y, const TensorView& rstd, const TensorView& x,
                    const TensorView& branch, const TensorView& weight, double eps) override;
  void rms_norm_backward_add(const TensorView& grad_x, const TensorView& grad_weight, const TensorView& grad_y,
                             const TensorView& x, const TensorView& weight, const TensorView& rstd,
                             const TensorView& grad_residual) override;
  void swiglu(const TensorView& out, const TensorView& a, const TensorView& b) override;
  void swiglu_backward(const TensorView& grad_a, const TensorView& grad_b, const TensorView& grad_out,
                       const TensorView& a, const TensorView& b) override;

  void rope(const TensorView& out, const TensorView& in, const TensorView& cos, const TensorView& sin,
            const TensorView& positions, bool inverse) override;
  void causal_attention(const TensorView& out, const TensorView& lse, const TensorView& q, const TensorView& k,
                        const TensorView& v, double scale) override;
  // fused_attention.cu: always the row-per-warp kernel (for decoding: T small), which reads the key count from
  // the device when it runs; bit for bit causal_attention on k, v narrowed to L keys when L > T and T < 16.
  void causal_attention_prefix(const TensorView& out, const TensorView& lse, const TensorView& q,
                               const TensorView& k, const TensorView& v, const TensorView& key_count,
                               double scale) override;
  void causal_attention_backward(const TensorView& grad_q, const TensorView& grad_k, const TensorView& grad_v,
                                 const TensorView& grad_out, const TensorView& q, const TensorView& k,
                                 const TensorView& v, const TensorView& out, const TensorView& lse,
                                 double scale) override;
  void adamw_update(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                    const TensorView& exp_avg_sq, const AdamWStep& step) override;
  void adamw_update_many(const std::vector<AdamWTensors>& tensors, const AdamWStep& step) override;
  // fused_adamw.cu: the same kernel, its scalars read from the device tensor `step` when it runs.
  bool adamw_update_many_from_device(const std::vector<AdamWTensors>& tensors, const TensorView& step) override;
  // kernels/cuda/graph.cu: CUDA graphs (stream capture under nvcc, recorded closures when emulated).
  bool begin_capture() override;
  std::unique_ptr<DeviceGraph> end_capture() override;
  // kernels/cuda/clip_grad_norm.cu: float32 / float64 gradients in three launches.
  bool clip_grad_norm_native(const TensorView& norm, const std::vector<TensorView>& grads, double max_norm) override;
  // kernels/cuda/sample_token.cu: one block, one launch; lm::Sampler's rules on the device.
  bool sample_token(const TensorView& token, const TensorView& result, const TensorView& logits,
                    const TensorView& uniform, const TokenSampling& sampling) override;

 private:
  int index_;
};

// The backend of GPU `index`; throws tapegrad::Error when there is no such device.
CudaBackend& cuda_backend(int index);

// A temporary device buffer of one backend call, from the backend's caching allocator (no
// cudaMalloc in steady state), returned to it when the call ends. Work queued on the stream
// before that still sees valid memory: a later user of the block is ordered after it.
class ScratchBuffer {
 public:
  ScratchBuffer(Backend& backend, size_t nbytes)
      : backend_(backend), nbytes_(nbytes), data_(nbytes > 0 ? backend.allocate(nbytes) : nullptr) {}
  ~ScratchBuffer() {
    if (data_ != nullptr) backend_.deallocate(data_, nbytes_);
  }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  Backend& backend_;
  size_t nbytes_;
  void* data_;
};

// Number of devices this process sees (0 without a GPU; 1 in the emulated build).
int device_count();
// True in the emulated build (HIP-CPU on the host), false under nvcc.
bool is_emulated();

// The caching allocator's counters: bytes held from the driver (reserved) and handed out to
// tensors (allocated), driver allocations made (cudaMalloc calls); empty_cache() frees the cache.
struct MemoryStats {
  size_t reserved_bytes = 0, allocated_bytes = 0, peak_allocated_bytes = 0;
  uint64_t driver_allocations = 0;
};
MemoryStats memory_stats();
void empty_cache();

// Frees what the backend keeps for the whole process (the cuBLAS handle, the device error record)
// and the allocator's cache, so that a leak checker (compute-sanitizer --leak-check full) reports
// only memory still held by live objects. Call it only while no other thread uses the GPU; the
// backend re-creates what it needs on next use. The CUDA test suite calls it before it exits.
void release_process_resources();
void release_cublas_handle();  // kernels/cuda/matmul.cu; part of release_process_resources()

// Host→device copies through pinned staging memory (kernels/cuda/host_staging.cu, nvcc build only):
// queues the copy and returns at once, the caller may reuse src. False (nothing done) for copies too
// large to stage. release_host_staging() frees the staging blocks (part of release_process_resources()).
bool copy_from_host_staged(void* dst, const void* src, size_t nbytes);
void release_host_staging();

// Host synchronisations performed so far (device→host copies, synchronize()).
uint64_t sync_count();

// ---- matmul settings (kernels/cuda/matmul.cu) ----
// TF32 tensor cores for float32 matmuls (cuBLAS CUBLAS_TF32_TENSOR_OP_MATH): about 10 significant
// bits per product instead of 24, so off by default (results then match the CPU to ~1e-6); the
// benchmarks turn it on, as PyTorch's allow_tf32 does. No effect on float64 or on the SIMT kernel.
void set_allow_tf32(bool allow);
bool allow_tf32();
// Which matmul runs: cuBLAS (the default under nvcc) or our own tiled SIMT kernel (the only one in
// the emulated build; set_matmul_impl(Cublas) throws there). The first value comes from the
// environment variable TAPEGRAD_CUDA_MATMUL=cublas|simt, read once.
enum class MatmulImpl { Cublas, Simt };
void set_matmul_impl(MatmulImpl impl);
MatmulImpl matmul_impl();

// ---- attention settings (kernels/cuda/flash_attention_tc.cu) ----
// Which kernels run bf16 causal attention: the flash attention on tensor cores (the default; mma.sync, also
// in the emulated build through mma.h's emulation) for the shapes it takes (flash_attention_tc.h), or always
// the SIMT kernels (float32 compute on bf16 storage). The first value comes from the environment variable
// TAPEGRAD_CUDA_ATTENTION=tc|simt, read once. float32/float64 attention is always SIMT.
enum class AttentionImpl { TensorCore, Simt };
void set_attention_impl(AttentionImpl impl);
AttentionImpl attention_impl();

}  // namespace tapegrad::kernels::cuda
