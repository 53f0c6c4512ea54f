// nccl.h — NCCL collectives on device buffers for dist/'s NCCL communicator (dist/nccl_communicator.cpp).
// The lowest layer's side of it: raw device pointers and kernels::DType, no CUDA header. The code is in the
// CUDA plugin (kernels/cuda/nccl.cu, built with TAPEGRAD_NCCL: nvcc and libnccl found); nccl_plugin.cpp
// forwards these calls to it.
//
//   NcclId id = rank == 0 ? nccl_unique_id() : NcclId{};   // then every rank gets rank 0's id (over MPI)
//   NcclComm comm(id, rank, world_size);                   // collective: every rank constructs it
//   comm.all_reduce(ptr, n, DType::Float32, /*mean=*/true); // enqueued on the CUDA backend's stream
//   comm.synchronize(300, "all_reduce");                   // waits, or aborts NCCL and throws after 300 s
//
// Collectives are enqueued on the one stream every kernel of the backend uses (cuda/runtime.h), so they
// run after the kernels that wrote their buffers and before those that read them, without a host wait.
#pragma once
#include <array>
#include <cstdint>
#include <memory>

#include "kernels/dtype.h"

namespace tapegrad::kernels {

using NcclId = std::array<uint8_t, 128>;  // ncclUniqueId's bytes

bool nccl_built();         // this build has NCCL (TAPEGRAD_NCCL)
NcclId nccl_unique_id();   // a fresh id (ncclGetUniqueId), on one rank only; throws without NCCL

class NcclComm {
 public:
  // ncclCommInitRank on the current CUDA device; every rank of the world calls it with the same id.
  NcclComm(const NcclId& id, int rank, int world_size);
  ~NcclComm();  // ncclCommDestroy, or ncclCommAbort after a timeout or an error
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const;
  int world_size() const;
  // In place on device memory; mean: NCCL's ncclAvg (floating dtypes only).
  void all_reduce(void* data, int64_t count, DType dtype, bool mean);
  void broadcast(void* data, int64_t count, DType dtype, int root);
  // Waits for everything enqueued on the stream so far, polling it and NCCL's asynchronous error state;
  // past timeout_s (a rank died or hangs) the communicator is aborted and an Error names `op`.
  void synchronize(double timeout_s, const char* op);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tapegrad::kernels
