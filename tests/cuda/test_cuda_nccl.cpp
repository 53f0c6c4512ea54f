// test_cuda_nccl.cpp — the NCCL communicator on a real GPU, world size 1 (the lent machines have one GPU):
// set-up (the unique id through a bootstrap communicator: here the single-process one, so no MPI is
// needed on the GPU machine), all_reduce (sum, mean) and broadcast of tensors on cuda:0 in place, a CPU
// tensor refused. Built only with TAPEGRAD_NCCL (nvcc + libnccl); like the rest
// of tests/cuda/ it reports Skipped without a GPU. Untested for lack of a multi-GPU machine: 2+ ranks,
// the timeout when a rank dies.
#include <catch2/catch.hpp>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "dist/communicator.h"
#include "kernels/error.h"

using namespace tapegrad;

namespace {

std::shared_ptr<dist::Communicator> gpu_world() {
  static std::shared_ptr<dist::Communicator> w =
      dist::nccl_world(std::make_shared<dist::SingleProcess>(), Device::cuda(0), {.timeout_s = 60});
  return w;
}

}  // namespace

TEST_CASE("nccl: all_reduce and broadcast of tensors on cuda:0 in place, world size 1", "[cuda][nccl]") {
  auto w = gpu_world();
  REQUIRE(w->name() == "nccl");
  REQUIRE(w->world_size() == 1);
  const Tensor host = randn({1000});
  Tensor t = host.to(Device::cuda(0));
  w->all_reduce(t, dist::ReduceOp::Sum);
  CHECK(t.to_vector<float>() == host.to_vector<float>());
  w->all_reduce(t, dist::ReduceOp::Mean);
  CHECK(t.to_vector<float>() == host.to_vector<float>());
  Tensor i = arange(10.0).to(Device::cuda(0));
  w->all_reduce(i, dist::ReduceOp::Sum);
  CHECK(i.to_vector<int64_t>() == arange(10.0).to_vector<int64_t>());
  w->broadcast(t, 0);
  CHECK(t.to_vector<float>() == host.to_vector<float>());
  Tensor cpu = randn({3});
  CHECK_THROWS_WITH(w->all_reduce(cpu, dist::ReduceOp::Sum), Catch::Contains("the tensor is on cpu, but this NCCL "
                                                                             "communicator works on cuda:0"));
}
