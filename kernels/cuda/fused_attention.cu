// fused_attention.cu — PLACEHOLDER (being written): each function throws until its kernel lands.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {

void CudaBackend::causal_attention(const TensorView& out, const TensorView& lse, const TensorView& q, const TensorView& k, const TensorView& v, double scale) {
  throw Error("cuda: causal_attention is not written yet");
}

void CudaBackend::causal_attention_backward(const TensorView& grad_q, const TensorView& grad_k, const TensorView& grad_v, const TensorView& grad_out, const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& out, const TensorView& lse, double scale) {
  throw Error("cuda: causal_attention_backward is not written yet");
}

}  // namespace tapegrad::kernels::cuda
