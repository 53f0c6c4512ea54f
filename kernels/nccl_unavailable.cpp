// nccl_unavailable.cpp — kernels/nccl.h in a build without NCCL (no nvcc, or no libnccl).
#include "kernels/error.h"
#include "kernels/nccl.h"

namespace tapegrad::kernels {

namespace {
[[noreturn]] void no_nccl() {
  throw Error("this build of tapegrad has no NCCL (it needs the CUDA backend built with nvcc and libnccl; "
              "see TAPEGRAD_NCCL)");
}
}  // namespace

struct NcclComm::Impl {};

bool nccl_built() { return false; }
NcclId nccl_unique_id() { no_nccl(); }
NcclComm::NcclComm(const NcclId&, int, int) { no_nccl(); }
NcclComm::~NcclComm() = default;
int NcclComm::rank() const { return 0; }
int NcclComm::world_size() const { return 1; }
void NcclComm::all_reduce(void*, int64_t, DType, bool) { no_nccl(); }
void NcclComm::broadcast(void*, int64_t, DType, int) { no_nccl(); }
void NcclComm::synchronize(double, const char*) { no_nccl(); }

}  // namespace tapegrad::kernels
