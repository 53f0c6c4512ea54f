// index.cu — PLACEHOLDER (being written): each function throws until its kernel lands.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {

void CudaBackend::index_select(const TensorView& out, const TensorView& in, int dim, const TensorView& index) {
  throw Error("cuda: index_select is not written yet");
}

void CudaBackend::index_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) {
  throw Error("cuda: index_add is not written yet");
}

void CudaBackend::gather(const TensorView& out, const TensorView& in, int dim, const TensorView& index) {
  throw Error("cuda: gather is not written yet");
}

void CudaBackend::scatter_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) {
  throw Error("cuda: scatter_add is not written yet");
}

}  // namespace tapegrad::kernels::cuda
