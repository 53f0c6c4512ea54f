// nccl_comm.h — the NCCL communicator of the CUDA plugin (kernels/cuda/nccl.cu, built with TAPEGRAD_NCCL),
// handed to the core through the plugin's table (kernels/cuda_plugin_api.h: nccl_comm), where
// kernels::NcclComm (kernels/nccl.h, kernels/nccl_plugin.cpp) forwards to it. Same calls, same meaning.
#pragma once
#include <memory>

#include "kernels/cuda_plugin_api.h"

namespace tapegrad::kernels::cuda {

NcclId nccl_unique_id();  // ncclGetUniqueId

class CudaNcclComm final : public PluginNcclComm {
 public:
  CudaNcclComm(const NcclId& id, int rank, int world_size);  // ncclCommInitRank on the current device
  ~CudaNcclComm() override;                                  // ncclCommDestroy, or ncclCommAbort once broken
  CudaNcclComm(const CudaNcclComm&) = delete;
  CudaNcclComm& operator=(const CudaNcclComm&) = delete;

  int rank() const override;
  int world_size() const override;
  void all_reduce(void* data, int64_t count, DType dtype, bool mean) override;
  void broadcast(void* data, int64_t count, DType dtype, int root) override;
  void synchronize(double timeout_s, const char* op) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tapegrad::kernels::cuda
