// nccl.cu — the CUDA plugin's NCCL communicator (TAPEGRAD_NCCL; kernels/cuda/nccl_comm.h, behind kernels/nccl.h):
// set-up, all-reduce and broadcast on the CUDA backend's stream, and a synchronize that cannot hang (it polls
// cudaStreamQuery and ncclCommGetAsyncError, and aborts the communicator after the timeout).
#include "kernels/cuda/nccl_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "kernels/cuda/runtime.h"
#include "kernels/error.h"

namespace tapegrad::kernels::cuda {

namespace {

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess && r != ncclInProgress)
    throw Error(fmt::format("nccl: {}: {} ({})", what, ncclGetErrorString(r), ncclGetLastError(nullptr)));
}

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    default: throw Error(fmt::format("nccl: dtype {} is not supported (float32, float64, int32, int64)", d));
  }
}

}  // namespace

struct CudaNcclComm::Impl {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1;
  bool broken = false;
};

NcclId nccl_unique_id() {
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  NcclId out{};
  static_assert(sizeof(id.internal) == out.size());
  std::memcpy(out.data(), id.internal, out.size());
  return out;
}

CudaNcclComm::CudaNcclComm(const NcclId& id, int rank, int world_size) : impl_(std::make_unique<Impl>()) {
  TG_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "nccl: rank {} of a world of size {}", rank,
           world_size);
  ncclUniqueId uid;
  std::memcpy(uid.internal, id.data(), id.size());
  check_nccl(ncclCommInitRank(&impl_->comm, world_size, uid, rank), "ncclCommInitRank");
  impl_->rank = rank;
  impl_->size = world_size;
}

CudaNcclComm::~CudaNcclComm() {
  if (!impl_->comm) return;
  if (impl_->broken) ncclCommAbort(impl_->comm);
  else ncclCommDestroy(impl_->comm);
}

int CudaNcclComm::rank() const { return impl_->rank; }
int CudaNcclComm::world_size() const { return impl_->size; }

void CudaNcclComm::all_reduce(void* data, int64_t count, DType dtype, bool mean) {
  TG_CHECK(!impl_->broken, "nccl: all_reduce after an earlier collective failed");
  TG_CHECK(!mean || dtype == DType::Float32 || dtype == DType::Float64, "nccl: the mean of a {} tensor", dtype);
  check_nccl(ncclAllReduce(data, data, size_t(count), nccl_type(dtype), mean ? ncclAvg : ncclSum, impl_->comm,
                           cuda::stream()),
             "ncclAllReduce");
}

void CudaNcclComm::broadcast(void* data, int64_t count, DType dtype, int root) {
  TG_CHECK(!impl_->broken, "nccl: broadcast after an earlier collective failed");
  check_nccl(ncclBroadcast(data, data, size_t(count), nccl_type(dtype), root, impl_->comm, cuda::stream()),
             "ncclBroadcast");
}

void CudaNcclComm::synchronize(double timeout_s, const char* op) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (int polls = 0;; ++polls) {
    const cudaError_t e = cudaStreamQuery(cuda::stream());
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      impl_->broken = true;
      cuda::check(e, op);
    }
    ncclResult_t async = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(impl_->comm, &async), "ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress) {
      impl_->broken = true;
      check_nccl(async, op);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      impl_->broken = true;
      throw Error(fmt::format("{}: rank {} of {}: NCCL got no answer from the other ranks within {} s: a rank died "
                              "or hangs (the communicator is aborted)",
                              op, impl_->rank, impl_->size, timeout_s));
    }
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace tapegrad::kernels::cuda
