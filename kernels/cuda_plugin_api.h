// cuda_plugin_api.h — what the CUDA backend's plugin (libtapegrad_cuda.so) hands the core: one table of
// functions, returned by the plugin's one exported C entry point, tapegrad_cuda_plugin_v1()
// (kernels/cuda/plugin_entry.cpp). The core opens the plugin on the first use of a CUDA device
// (kernels/plugin_loader.h) and reaches the backend only through this table, so no binary above the
// plugin links a CUDA library: a CPU run never maps libcudart/libcublas.
//
// Both sides are C++ of the same build: the table passes C++ types (Backend&, DeviceMemory, NcclId) and
// its functions throw tapegrad::Error, which the core catches as its own (kernels/error.h is header-only,
// and libstdc++ compares exception types by name across shared objects). A plugin of another build is
// refused: struct_size and version must be the core's.
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/backend.h"
#include "kernels/device_memory.h"
#include "kernels/nccl.h"

namespace tapegrad::kernels {

// One NCCL communicator inside the plugin (kernels/cuda/nccl.cu), behind kernels::NcclComm
// (kernels/nccl_plugin.cpp): the calls of kernels/nccl.h, with the same meaning.
class PluginNcclComm {
 public:
  virtual ~PluginNcclComm() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual void all_reduce(void* data, int64_t count, DType dtype, bool mean) = 0;
  virtual void broadcast(void* data, int64_t count, DType dtype, int root) = 0;
  virtual void synchronize(double timeout_s, const char* op) = 0;
};

struct CudaPluginApi {
  uint32_t struct_size = 0;      // sizeof(CudaPluginApi) where the plugin was compiled
  const char* version = nullptr;  // the tapegrad version of the plugin's build (PROJECT_VERSION)
  bool emulated = false;          // HIP-CPU on the host (TAPEGRAD_CUDA_EMULATED), not a real GPU
  // GPUs this process sees; 0, not an error, without a driver or a device.
  int (*device_count)() = nullptr;
  // The backend of cuda:index; throws Error for a device that does not exist.
  Backend& (*backend)(int index) = nullptr;
  // kernels/device_memory.h for cuda:index (throws for a device that does not exist), and its peak reset.
  DeviceMemory (*device_memory)(int index) = nullptr;
  void (*reset_peak_device_memory)(int index) = nullptr;
  // TF32 tensor cores for float32 matmuls (kernels/cuda/cuda_backend.h: set_allow_tf32).
  void (*set_allow_tf32)(bool allow) = nullptr;
  // NCCL (kernels/nccl.h) in a plugin built with TAPEGRAD_NCCL; both null in one built without.
  NcclId (*nccl_unique_id)() = nullptr;
  std::unique_ptr<PluginNcclComm> (*nccl_comm)(const NcclId& id, int rank, int world_size) = nullptr;
};

// The exported entry point's name and type; "v1" changes when the way of loading it changes.
inline constexpr const char* kCudaPluginEntryPoint = "tapegrad_cuda_plugin_v1";
using CudaPluginEntryPoint = const CudaPluginApi* (*)();

}  // namespace tapegrad::kernels
