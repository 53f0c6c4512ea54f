// registry.cpp — maps a Device to its Backend. The CUDA backend is there when this build has it
// (TAPEGRAD_HAS_CUDA_BACKEND: nvcc for a real GPU, or the HIP-CPU emulated device).
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#if defined(TAPEGRAD_HAS_CUDA_BACKEND)
#include "kernels/cuda/cuda_backend.h"
#endif

namespace tapegrad::kernels {

Backend& backend(Device device) {
  if (device.type == DeviceType::CPU) return cpu::cpu_backend();
#if defined(TAPEGRAD_HAS_CUDA_BACKEND)
  return cuda::cuda_backend(device.index);
#else
  throw Error(fmt::format("device {}: this build of tapegrad has no CUDA backend (configure with -DTAPEGRAD_CUDA=ON "
                          "where nvcc is installed, or -DTAPEGRAD_CUDA_EMULATED=ON to emulate one)",
                          device));
#endif
}

}  // namespace tapegrad::kernels
