// flash_attention_tc.h — the bf16 flash attention on tensor cores (flash_attention_tc.cu), as called by
// fused_attention.cu's dispatch, and the one helper both files share.
#pragma once
#include <cstddef>

#include "kernels/backend.h"

namespace tapegrad::kernels::cuda {

class CudaBackend;

// Whether the tensor-core kernels take this causal_attention call (its views already checked by
// fused_attention.cu): bfloat16, D ∈ {32, 64, 128}, q, k, v 16-byte aligned with strides multiple of 8, a
// GPU of compute capability ≥ 8.0 (or the emulated device), attention_impl() == TensorCore; with a KV cache
// (Tk > T) only for at least 16 query rows (decoding stays on the row-per-warp kernels).
bool flash_tc_takes_forward(const TensorView& q, const TensorView& k, const TensorView& v);
// The same for causal_attention_backward (Tk == T), also requiring grad_out and out to be 16-byte loadable.
bool flash_tc_takes_backward(const TensorView& q, const TensorView& k, const TensorView& v,
                             const TensorView& grad_out, const TensorView& out);

// out bf16 [B, H, T, D], lse float32 [B, H, T]; the contract of Backend::causal_attention.
void flash_tc_forward(const TensorView& out, const TensorView& lse, const TensorView& q, const TensorView& k,
                      const TensorView& v, double scale);
// grad_q, grad_k, grad_v bf16, written (Backend::causal_attention_backward).
void flash_tc_backward(CudaBackend& backend, const TensorView& grad_q, const TensorView& grad_k,
                       const TensorView& grad_v, const TensorView& grad_out, const TensorView& q, const TensorView& k,
                       const TensorView& v, const TensorView& out, const TensorView& lse, double scale);

// Lets `kernel` use `bytes` of dynamic shared memory (above the default 48 KiB: an opt-in on NVIDIA GPUs;
// nothing in the emulated build). Thread-safe; remembers what each kernel was granted.
void allow_kernel_shared_bytes(const void* kernel, size_t bytes);

}  // namespace tapegrad::kernels::cuda
