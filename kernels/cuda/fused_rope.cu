// fused_rope.cu — PLACEHOLDER (being written): each function throws until its kernel lands.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {

void CudaBackend::rope(const TensorView& out, const TensorView& in, const TensorView& cos, const TensorView& sin, const TensorView& positions, bool inverse) {
  throw Error("cuda: rope is not written yet");
}

}  // namespace tapegrad::kernels::cuda
