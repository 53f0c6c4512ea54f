// registry.cpp — maps a Device to its Backend. The CUDA backend registers here when built.
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"

namespace tapegrad::kernels {

Backend& backend(Device device) {
  if (device.type == DeviceType::CPU) return cpu::cpu_backend();
  throw Error(fmt::format("device {}: this build of tapegrad has no CUDA backend yet (CPU only)", device));
}

}  // namespace tapegrad::kernels
