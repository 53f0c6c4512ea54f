// memory_info.h — two more of the caching allocator's accessors (kernels/cuda/memory.cu), apart from
// cuda_backend.h so that adding them recompiled one file: the peak reset a measurement starts with, and the
// device's total memory. Reached from above the backends through kernels/device_memory.h.
#pragma once
#include <cstddef>

namespace tapegrad::kernels::cuda {

// peak_allocated_bytes := allocated_bytes now (a test measures the peak of what follows).
void reset_peak_memory_stats();
// The current device's total memory (cudaMemGetInfo; on the emulated device what HIP-CPU reports).
size_t device_total_bytes();

}  // namespace tapegrad::kernels::cuda
