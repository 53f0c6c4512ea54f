// registry.cpp — maps a Device to its Backend. The CPU backend is linked in; the CUDA backend is a plugin,
// libtapegrad_cuda.so, opened on the first call here that needs a CUDA device (kernels/plugin_loader.h),
// so the CPU path never maps a CUDA library. A build without the CUDA backend makes no plugin and says so.
#include "kernels/backend.h"
#include "kernels/bf16_bridge.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/device_memory.h"
#include "kernels/plugin_loader.h"

namespace tapegrad::kernels {

// Every backend is returned inside its bf16 bridge (kernels/bf16_bridge.h: bfloat16 computed in float32).
Backend& backend(Device device) {
  static Backend& cpu_bridged = bf16_bridge(cpu::cpu_backend());
  if (device.type == DeviceType::CPU) return cpu_bridged;
  return bf16_bridge(cuda_plugin(device).backend(device.index));
}

int cuda_device_count() {
  const CudaPluginApi* plugin = try_cuda_plugin();
  return plugin != nullptr ? plugin->device_count() : 0;
}

void set_cuda_allow_tf32(bool allow) { cuda_plugin(Device::cuda(0)).set_allow_tf32(allow); }

// Without a plugin no CUDA device can have been made: no counters to read or reset (as for the CPU).
DeviceMemory device_memory(Device device) {
  if (device.type == DeviceType::CPU) return {};
  const CudaPluginApi* plugin = try_cuda_plugin();
  return plugin != nullptr ? plugin->device_memory(device.index) : DeviceMemory{};
}

void reset_peak_device_memory(Device device) {
  if (device.type == DeviceType::CPU) return;
  const CudaPluginApi* plugin = try_cuda_plugin();
  if (plugin != nullptr) plugin->reset_peak_device_memory(device.index);
}

}  // namespace tapegrad::kernels
