// communicator.h — what data-parallel training needs from the processes it runs on (docs/distributed.md):
// each process ("rank") knows its number and the world size, and the ranks combine tensors in place.
//
//   std::shared_ptr<dist::Communicator> comm = dist::mpi_world({.timeout_s = 120});  // under mpirun
//   comm->all_reduce(grad, dist::ReduceOp::Mean);      // every rank now holds the mean of all ranks'
//   auto work = comm->all_reduce_async(bucket, dist::ReduceOp::Sum);  // runs while backward goes on
//   ...  work->wait();
//
// Implementations: SingleProcess (world size 1: every collective is the identity, always built) and
// MPI (dist/mpi_communicator.cpp, TAPEGRAD_MPI: Open MPI's host buffers; a tensor on a GPU is staged
// through the host), and NCCL (dist/nccl_communicator.cpp: device buffers, its unique id carried by a
// bootstrap communicator, MPI for several ranks; the NCCL calls are in kernels/cuda/nccl.cu, the only
// place that may include CUDA headers).
//
// Rules every implementation keeps:
//  * Collectives are called by every rank in the same order with tensors of the same shape and dtype
//    (contiguous; float32, float64, int32 or int64; Mean only for floating tensors). The result is the
//    same on every rank, bit for bit, so replicas that apply the same update stay identical.
//  * Nothing waits forever: a collective that has not completed after `timeout_s` (a rank died, hangs
//    or called another collective) throws dist::TimeoutError naming the operation, and the
//    communicator is then broken: its destructor aborts the whole job (MPI_Abort) instead of waiting.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "autograd/tensor.h"
#include "kernels/error.h"

namespace tapegrad::dist {

enum class ReduceOp { Sum, Mean };

// A collective that was started; wait() returns when its result is in the tensor (or throws).
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  // Lets the collective advance without waiting; true once it is complete (wait() is still needed to
  // finish it). MPI without a progress thread moves a non-blocking collective only inside MPI calls, so
  // whoever overlaps work with a collective calls this now and then (GradientSync does, from its hook).
  virtual bool test() { return false; }
};

class TimeoutError : public Error {
 public:
  using Error::Error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string name() const = 0;  // "single", "mpi", "nccl"

  // In place: t becomes the sum (or mean) over the ranks of their t.
  void all_reduce(Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }
  // The same, started now; t (and its storage) must stay alive and untouched until wait().
  virtual std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) = 0;
  // In place: every rank's t becomes root's t.
  virtual void broadcast(Tensor& t, int root) = 0;
  virtual void barrier() = 0;
  // Ends this process and, with MPI, every rank of the job (MPI_Abort), with `exit_code`: what a rank
  // that fails must do instead of returning (the others would wait in their next collective).
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// World size 1 (no MPI needed): all_reduce and broadcast leave the tensor as it is.
class SingleProcess : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string name() const override { return "single"; }
  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override;
  void broadcast(Tensor& t, int root) override;
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) override;
};

struct MpiOptions {
  double timeout_s = 300;  // a collective not done by then throws TimeoutError (see above)
};

// The MPI world (MPI_Init_thread on first use, MPI_Finalize when the last reference goes). Throws in a
// build without MPI, naming the CMake option.
std::shared_ptr<Communicator> mpi_world(const MpiOptions& options = {});

// True when this build has NCCL (TAPEGRAD_NCCL: the CUDA backend built with nvcc and libnccl).
bool nccl_built();
// The NCCL world for tensors on `device` (a GPU), set up over `bootstrap` (the MPI world, which carries
// NCCL's unique id from rank 0 to the others): same ranks, same rules; collectives run on the CUDA
// backend's stream. Throws in a build without NCCL.
std::shared_ptr<Communicator> nccl_world(std::shared_ptr<Communicator> bootstrap, Device device,
                                         const MpiOptions& options = {});

// Every rank's `bytes` become root's (a broadcast of the bytes packed into int64 words): how NCCL's
// unique id travels from rank 0 to the others.
void broadcast_bytes(Communicator& comm, std::span<uint8_t> bytes, int root);

// Checks shared by the implementations (op names the operation in the message).
void check_collective_tensor(const char* op, const Tensor& t, ReduceOp reduce);

}  // namespace tapegrad::dist
