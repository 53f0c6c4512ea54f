// mpi_communicator.cpp — the MPI communicator (built with TAPEGRAD_MPI; Open MPI from Debian's
// libopenmpi-dev). Collectives are the non-blocking MPI_Iallreduce / MPI_Ibcast / MPI_Ibarrier on a
// private duplicate of MPI_COMM_WORLD, completed by polling MPI_Test until done or until the timeout
// (MPI itself would wait forever for a rank that hangs). Host buffers: a tensor on another device is
// copied to the host, reduced there and copied back.
//
// Bitwise agreement: for a commutative op Open MPI's reduction algorithms give every rank the same
// bits (each element is combined in one order, then distributed), which the replicas rely on.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "autograd/grad_mode.h"
#include "dist/communicator.h"

namespace tapegrad::dist {

namespace {

using Clock = std::chrono::steady_clock;

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    default: throw Error(fmt::format("mpi: dtype {} has no MPI type here", d));
  }
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, size_t(len));
}

class MpiWorld;

// One started collective: the host buffer it works on (kept alive until it completes, or forever
// when it timed out: MPI may still write into it), and where the result goes afterwards.
class MpiWork : public Work {
 public:
  MpiWork(MpiWorld& world, const char* op, Tensor target, Tensor buffer, MPI_Request req, double scale)
      : world_(world), op_(op), target_(std::move(target)), buffer_(std::move(buffer)), req_(req), scale_(scale) {}
  ~MpiWork() override;
  void wait() override;
  bool test() override;

 private:
  MpiWorld& world_;
  const char* op_;
  Tensor target_, buffer_;  // buffer_ is target_ itself for a host tensor
  MPI_Request req_;
  double scale_;            // 1/N for a mean
  bool done_ = false;       // wait() has run
  bool complete_ = false;   // test() saw it complete
};

class MpiWorld : public Communicator {
 public:
  explicit MpiWorld(const MpiOptions& options) : timeout_s_(options.timeout_s) {
    TG_CHECK(options.timeout_s > 0, "mpi_world: timeout_s must be positive, got {}", options.timeout_s);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // FUNNELED: only the thread that made the world calls MPI (OpenMP's workers never do).
      const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      TG_CHECK(rc == MPI_SUCCESS, "mpi_world: MPI_Init_thread failed: {}", mpi_error(rc));
      owns_init_ = true;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);  // errors come back as codes, turned into Error
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiWorld() override {
    if (broken_) {
      // A collective timed out: the other ranks may be stuck in it, and MPI_Finalize would wait for
      // them. End the whole job (mpirun stops every rank).
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Comm_free(&comm_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_init_ && !finalized) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    check_collective_tensor("all_reduce", t, op);
    check_usable("all_reduce");
    Tensor buffer = host_buffer(t);
    MPI_Request req;
    check(MPI_Iallreduce(MPI_IN_PLACE, buffer.data_ptr(), int_count(t, "all_reduce"), mpi_type(t.dtype()), MPI_SUM,
                         comm_, &req),
          "all_reduce");
    return std::make_unique<MpiWork>(*this, "all_reduce", t, buffer, req, op == ReduceOp::Mean ? 1.0 / size_ : 1.0);
  }

  void broadcast(Tensor& t, int root) override {
    check_collective_tensor("broadcast", t, ReduceOp::Sum);
    check_usable("broadcast");
    TG_CHECK(root >= 0 && root < size_, "broadcast: root {} is not a rank of this world of size {}", root, size_);
    Tensor buffer = host_buffer(t);
    MPI_Request req;
    check(MPI_Ibcast(buffer.data_ptr(), int_count(t, "broadcast"), mpi_type(t.dtype()), root, comm_, &req),
          "broadcast");
    MpiWork(*this, "broadcast", t, buffer, req, 1.0).wait();
  }

  [[noreturn]] void abort(int exit_code) override {
    std::fflush(nullptr);  // the message this rank printed first
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // (MPI_Abort does not return)
  }

  void barrier() override {
    check_usable("barrier");
    MPI_Request req;
    check(MPI_Ibarrier(comm_, &req), "barrier");
    MpiWork(*this, "barrier", Tensor(), Tensor(), req, 1.0).wait();
  }

  // Polls `req` until it completes; past the timeout the world is broken and TimeoutError is thrown.
  void wait_for(MPI_Request& req, const char* op) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    for (int polls = 0;; ++polls) {
      int done = 0;
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), op);
      if (done) return;
      if (Clock::now() > deadline) {
        broken_ = true;
        throw TimeoutError(fmt::format(
            "{}: rank {} of {} got no answer from the other ranks within {} s: a rank died or hangs (the job "
            "will be aborted)",
            op, rank_, size_, timeout_s_));
      }
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));  // a long wait: yield the core
    }
  }
  void keep_forever(Tensor t) { graveyard_.push_back(std::move(t)); }

 private:
  void check(int rc, const char* op) {
    if (rc == MPI_SUCCESS) return;
    broken_ = true;
    throw Error(fmt::format("{}: MPI error on rank {} of {}: {}", op, rank_, size_, mpi_error(rc)));
  }
  void check_usable(const char* op) const {
    TG_CHECK(!broken_, "{}: an earlier collective of this communicator failed; no more collectives can run", op);
  }
  static int int_count(const Tensor& t, const char* op) {
    TG_CHECK(t.numel() <= int64_t(1) << 30, "{}: {} elements is more than one MPI call takes here (2^30)", op,
             t.numel());
    return int(t.numel());
  }
  // The tensor itself when it is on the host, else a host copy of it.
  static Tensor host_buffer(const Tensor& t) {
    return t.device() == Device::cpu() ? t : t.detach().to(Device::cpu()).contiguous();
  }

  double timeout_s_;
  bool owns_init_ = false, broken_ = false;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<Tensor> graveyard_;  // buffers of collectives that timed out
};

MpiWork::~MpiWork() {
  if (done_) return;
  try {
    wait();  // a Work dropped without wait(): complete it, so MPI never writes into freed memory
  } catch (const Error&) {
    // timed out: wait() kept the buffer alive; the world aborts the job when it goes
  }
}

bool MpiWork::test() {
  if (done_ || complete_) return true;
  int flag = 0;
  if (MPI_Test(&req_, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;  // wait() reports it
  complete_ = flag != 0;  // (MPI has set req_ to MPI_REQUEST_NULL; wait() then returns at once)
  return complete_;
}

void MpiWork::wait() {
  if (done_) return;
  done_ = true;
  try {
    world_.wait_for(req_, op_);
  } catch (...) {
    world_.keep_forever(buffer_);
    throw;
  }
  if (!buffer_.defined()) return;
  NoGradGuard no_grad;  // parameters may be broadcast; the result is never recorded
  if (scale_ != 1.0) buffer_.mul_(scale_);
  if (buffer_.storage() != target_.storage()) target_.copy_(buffer_);
  else target_.storage()->bump_version();
}

}  // namespace

std::shared_ptr<Communicator> mpi_world(const MpiOptions& options) {
  // One world per process: MPI can be initialized only once.
  static std::mutex mutex;
  static std::weak_ptr<Communicator> existing;
  std::lock_guard lock(mutex);
  if (auto world = existing.lock()) return world;
  auto world = std::make_shared<MpiWorld>(options);
  existing = world;
  return world;
}

}  // namespace tapegrad::dist
