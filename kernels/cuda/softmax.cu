// softmax.cu — PLACEHOLDER (being written): each function throws until its kernel lands.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {

void CudaBackend::softmax(const TensorView& out, const TensorView& in, int dim, bool log) {
  throw Error("cuda: softmax is not written yet");
}

void CudaBackend::softmax_backward(const TensorView& grad_in, const TensorView& grad_out, const TensorView& y, int dim, bool log) {
  throw Error("cuda: softmax_backward is not written yet");
}

}  // namespace tapegrad::kernels::cuda
