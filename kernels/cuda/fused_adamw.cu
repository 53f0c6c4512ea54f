// fused_adamw.cu — PLACEHOLDER (being written): each function throws until its kernel lands.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {

void CudaBackend::adamw_update(const TensorView& param, const TensorView& grad, const TensorView& exp_avg, const TensorView& exp_avg_sq, const AdamWStep& step) {
  throw Error("cuda: adamw_update is not written yet");
}

}  // namespace tapegrad::kernels::cuda
