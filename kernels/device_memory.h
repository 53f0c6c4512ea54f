// device_memory.h — a GPU's memory as seen from above the backends (lm/, tools/, tests), without naming CUDA:
// the caching allocator's counters (kernels/cuda/memory.cu) and the device's total memory.
//   kernels::reset_peak_device_memory(d);  train_step();  size_t peak = kernels::device_memory(d).peak_allocated_bytes;
// The CPU has no such counters (its memory is the process's RSS): device_memory(cpu) is all zeros, as it is for
// every device in a build without the CUDA backend, or where its plugin cannot be loaded (kernels/plugin_loader.h;
// a CUDA device cannot be made there in the first place). For the CPU neither function loads the plugin.
#pragma once
#include <cstddef>

#include "kernels/dtype.h"  // Device

namespace tapegrad::kernels {

struct DeviceMemory {
  size_t total_bytes = 0;           // the device's memory (cudaMemGetInfo's total)
  size_t allocated_bytes = 0;       // held by tensors now (as the allocator rounds them)
  size_t peak_allocated_bytes = 0;  // the most held at once since the start or the last reset
  size_t reserved_bytes = 0;        // held from the driver by the caching allocator (≥ allocated_bytes)
};

DeviceMemory device_memory(Device device);
void reset_peak_device_memory(Device device);  // peak := allocated now

}  // namespace tapegrad::kernels
