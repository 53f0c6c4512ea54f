// plugin_entry.cpp — the one exported entry point of the CUDA plugin libtapegrad_cuda.so:
// tapegrad_cuda_plugin_v1() returns the table of kernels/cuda_plugin_api.h, through which the core
// (kernels/registry.cpp, kernels/nccl_plugin.cpp) reaches this backend after opening the plugin with dlopen.
// Plain C++ (no CUDA types): the same file in the nvcc and the emulated build.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/memory_info.h"
#include "kernels/cuda_plugin_api.h"
#if defined(TAPEGRAD_NCCL)
#include "kernels/cuda/nccl_comm.h"
#endif

namespace tapegrad::kernels::cuda {
namespace {

Backend& backend_of(int index) { return cuda_backend(index); }

DeviceMemory device_memory_of(int index) {
  (void)cuda_backend(index);  // an error for a device that does not exist
  const MemoryStats s = memory_stats();
  return {.total_bytes = device_total_bytes(),
          .allocated_bytes = s.allocated_bytes,
          .peak_allocated_bytes = s.peak_allocated_bytes,
          .reserved_bytes = s.reserved_bytes};
}

void reset_peak_of(int /*index: one caching allocator for the process*/) { reset_peak_memory_stats(); }

#if defined(TAPEGRAD_NCCL)
std::unique_ptr<PluginNcclComm> make_nccl_comm(const NcclId& id, int rank, int world_size) {
  return std::make_unique<CudaNcclComm>(id, rank, world_size);
}
#endif

CudaPluginApi make_api() {
  CudaPluginApi api;
  api.struct_size = sizeof(CudaPluginApi);
  api.version = TAPEGRAD_VERSION_STRING;
  api.emulated = is_emulated();
  api.device_count = &device_count;
  api.backend = &backend_of;
  api.device_memory = &device_memory_of;
  api.reset_peak_device_memory = &reset_peak_of;
  api.set_allow_tf32 = &set_allow_tf32;
#if defined(TAPEGRAD_NCCL)
  api.nccl_unique_id = &nccl_unique_id;
  api.nccl_comm = &make_nccl_comm;
#endif
  return api;
}

}  // namespace
}  // namespace tapegrad::kernels::cuda

extern "C" __attribute__((visibility("default"))) const tapegrad::kernels::CudaPluginApi* tapegrad_cuda_plugin_v1() {
  static const tapegrad::kernels::CudaPluginApi api = tapegrad::kernels::cuda::make_api();
  return &api;
}
