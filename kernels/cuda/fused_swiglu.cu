// fused_swiglu.cu — PLACEHOLDER (being written): each function throws until its kernel lands.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {

void CudaBackend::swiglu(const TensorView& out, const TensorView& a, const TensorView& b) {
  throw Error("cuda: swiglu is not written yet");
}

void CudaBackend::swiglu_backward(const TensorView& grad_a, const TensorView& grad_b, const TensorView& grad_out, const TensorView& a, const TensorView& b) {
  throw Error("cuda: swiglu_backward is not written yet");
}

}  // namespace tapegrad::kernels::cuda
