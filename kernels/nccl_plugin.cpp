// nccl_plugin.cpp — kernels/nccl.h in a build with NCCL (TAPEGRAD_NCCL): NCCL lives in the CUDA plugin
// (kernels/cuda/nccl.cu, libtapegrad_cuda.so, which links libnccl), and every call here forwards to the
// communicator the plugin's table makes (kernels/cuda_plugin_api.h), so the core links no CUDA library.
#include "kernels/error.h"
#include "kernels/nccl.h"
#include "kernels/plugin_loader.h"

namespace tapegrad::kernels {

namespace {
// The plugin's table, refused when that plugin was built without NCCL.
const CudaPluginApi& nccl_plugin() {
  const CudaPluginApi& plugin = cuda_plugin(Device::cuda(0));
  TG_CHECK(plugin.nccl_comm != nullptr && plugin.nccl_unique_id != nullptr,
           "nccl: the CUDA plugin {} was built without NCCL (TAPEGRAD_NCCL), unlike this tapegrad",
           cuda_plugin_path());
  return plugin;
}
}  // namespace

struct NcclComm::Impl {
  std::unique_ptr<PluginNcclComm> comm;
};

bool nccl_built() { return true; }
NcclId nccl_unique_id() { return nccl_plugin().nccl_unique_id(); }

NcclComm::NcclComm(const NcclId& id, int rank, int world_size) : impl_(std::make_unique<Impl>()) {
  impl_->comm = nccl_plugin().nccl_comm(id, rank, world_size);
}
NcclComm::~NcclComm() = default;
int NcclComm::rank() const { return impl_->comm->rank(); }
int NcclComm::world_size() const { return impl_->comm->world_size(); }
void NcclComm::all_reduce(void* data, int64_t count, DType dtype, bool mean) {
  impl_->comm->all_reduce(data, count, dtype, mean);
}
void NcclComm::broadcast(void* data, int64_t count, DType dtype, int root) {
  impl_->comm->broadcast(data, count, dtype, root);
}
void NcclComm::synchronize(double timeout_s, const char* op) { impl_->comm->synchronize(timeout_s, op); }

}  // namespace tapegrad::kernels
