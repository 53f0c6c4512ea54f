// matmul.cu — PLACEHOLDER (being written): each function throws until its kernel lands.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {

void CudaBackend::matmul(const TensorView& out, const TensorView& a, const TensorView& b, bool accumulate) {
  throw Error("cuda: matmul is not written yet");
}

}  // namespace tapegrad::kernels::cuda
