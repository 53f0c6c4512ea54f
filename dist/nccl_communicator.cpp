// nccl_communicator.cpp — dist::nccl_world: the Communicator for tensors on the GPU (NCCL through
// kernels/nccl.h), set up over a bootstrap communicator the way llm.c does it over MPI: rank 0 makes
// NCCL's unique id, the bootstrap broadcasts it, every rank joins. In a build without NCCL it throws.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "dist/communicator.h"
#include "kernels/nccl.h"

namespace tapegrad::dist {

namespace {

// NCCL collectives are stream-ordered: they are complete for every later kernel as soon as they are
// enqueued. wait() still waits on the host (with the timeout), which is where a dead rank shows.
class NcclWork : public Work {
 public:
  NcclWork(kernels::NcclComm& comm, double timeout_s, const char* op) : comm_(comm), timeout_s_(timeout_s), op_(op) {}
  void wait() override {
    if (done_) return;
    done_ = true;
    comm_.synchronize(timeout_s_, op_);
  }

 private:
  kernels::NcclComm& comm_;
  double timeout_s_;
  const char* op_;
  bool done_ = false;
};

class NcclWorld : public Communicator {
 public:
  NcclWorld(std::shared_ptr<Communicator> bootstrap, Device device, double timeout_s)
      : bootstrap_(std::move(bootstrap)), device_(device), timeout_s_(timeout_s) {
    TG_CHECK(device_.type == DeviceType::CUDA, "nccl_world: device {} is not a GPU", device_);
    kernels::NcclId id{};
    if (bootstrap_->rank() == 0) id = kernels::nccl_unique_id();
    broadcast_bytes(*bootstrap_, id, 0);
    comm_ = std::make_unique<kernels::NcclComm>(id, bootstrap_->rank(), bootstrap_->world_size());
  }

  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->world_size(); }
  std::string name() const override { return "nccl"; }

  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    check(t, "all_reduce", op);
    comm_->all_reduce(t.data_ptr(), t.numel(), t.dtype(), op == ReduceOp::Mean);
    t.storage()->bump_version();
    return std::make_unique<NcclWork>(*comm_, timeout_s_, "all_reduce");
  }
  void broadcast(Tensor& t, int root) override {
    check(t, "broadcast", ReduceOp::Sum);
    TG_CHECK(root >= 0 && root < world_size(), "broadcast: root {} is not a rank of this world of size {}", root,
             world_size());
    comm_->broadcast(t.data_ptr(), t.numel(), t.dtype(), root);
    t.storage()->bump_version();
    NcclWork(*comm_, timeout_s_, "broadcast").wait();
  }
  void barrier() override { bootstrap_->barrier(); }
  [[noreturn]] void abort(int exit_code) override {
    bootstrap_->abort(exit_code);
    std::_Exit(exit_code);  // (not reached: the bootstrap's abort ends the process)
  }

 private:
  void check(const Tensor& t, const char* op, ReduceOp reduce) const {
    check_collective_tensor(op, t, reduce);
    TG_CHECK(t.device() == device_, "{}: the tensor is on {}, but this NCCL communicator works on {}", op, t.device(),
             device_);
  }

  std::shared_ptr<Communicator> bootstrap_;
  Device device_;
  double timeout_s_;
  std::unique_ptr<kernels::NcclComm> comm_;
};

}  // namespace

void broadcast_bytes(Communicator& comm, std::span<uint8_t> bytes, int root) {
  // As int64 words (the collectives' smallest dtype here): 8 bytes each, the tail zero-padded.
  const int64_t words = int64_t((bytes.size() + 7) / 8);
  std::vector<int64_t> packed(size_t(words), 0);
  std::memcpy(packed.data(), bytes.data(), bytes.size());
  Tensor t = from_vector<int64_t>(packed, {words});
  comm.broadcast(t, root);
  const std::vector<int64_t> got = t.to_vector<int64_t>();
  std::memcpy(bytes.data(), got.data(), bytes.size());
}

bool nccl_built() { return kernels::nccl_built(); }

std::shared_ptr<Communicator> nccl_world(std::shared_ptr<Communicator> bootstrap, Device device,
                                         const MpiOptions& options) {
  TG_CHECK(bootstrap != nullptr, "nccl_world: no bootstrap communicator");
  TG_CHECK(kernels::nccl_built(), "this build of tapegrad has no NCCL (it needs the CUDA backend built with nvcc "
           "and libnccl: TAPEGRAD_NCCL)");
  return std::make_shared<NcclWorld>(std::move(bootstrap), device, options.timeout_s);
}

}  // namespace tapegrad::dist
