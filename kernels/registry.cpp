// registry.cpp — maps a Device to its Backend. The CUDA backend is there when this build has it
// (TAPEGRAD_HAS_CUDA_BACKEND: nvcc for a real GPU, or the HIP-CPU emulated device).
#include "kernels/backend.h"
#include "kernels/device_memory.h"
#include "kernels/cpu/cpu_backend.h"
#if defined(TAPEGRAD_HAS_CUDA_BACKEND)
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/memory_info.h"
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

DeviceMemory device_memory(Device device) {
  if (device.type == DeviceType::CPU) return {};
#if defined(TAPEGRAD_HAS_CUDA_BACKEND)
  (void)cuda::cuda_backend(device.index);  // an error for a device that does not exist
  const cuda::MemoryStats s = cuda::memory_stats();
  return {cuda::device_total_bytes(), s.allocated_bytes, s.peak_allocated_bytes};
#else
  return {};
#endif
}

void reset_peak_device_memory(Device device) {
#if defined(TAPEGRAD_HAS_CUDA_BACKEND)
  if (device.type == DeviceType::CUDA) cuda::reset_peak_memory_stats();
#else
  (void)device;
#endif
}

}  // namespace tapegrad::kernels
