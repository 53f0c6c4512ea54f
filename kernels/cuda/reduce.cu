// reduce.cu — PLACEHOLDER (being written): each function throws until its kernel lands.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {

void CudaBackend::reduce(ReduceOp op, const TensorView& out, const TensorView& in) {
  throw Error("cuda: reduce is not written yet");
}

void CudaBackend::max_along(const TensorView& values, const TensorView& indices, const TensorView& in, int dim) {
  throw Error("cuda: max_along is not written yet");
}

}  // namespace tapegrad::kernels::cuda
