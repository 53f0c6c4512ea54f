// elementwise.cu — PLACEHOLDER (being written): each function throws until its kernel lands.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {

void CudaBackend::fill(const TensorView& out, double value) {
  throw Error("cuda: fill is not written yet");
}

void CudaBackend::copy(const TensorView& out, const TensorView& in) {
  throw Error("cuda: copy is not written yet");
}

void CudaBackend::unary(UnaryOp op, const TensorView& out, const TensorView& in, double param) {
  throw Error("cuda: unary is not written yet");
}

void CudaBackend::unary_backward(UnaryOp op, const TensorView& grad_in, const TensorView& grad_out, const TensorView& x, const TensorView& y, double param) {
  throw Error("cuda: unary_backward is not written yet");
}

void CudaBackend::binary(BinaryOp op, const TensorView& out, const TensorView& a, const TensorView& b) {
  throw Error("cuda: binary is not written yet");
}

void CudaBackend::where(const TensorView& out, const TensorView& cond, const TensorView& a, const TensorView& b) {
  throw Error("cuda: where is not written yet");
}

}  // namespace tapegrad::kernels::cuda
