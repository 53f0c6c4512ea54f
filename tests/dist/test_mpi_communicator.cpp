// test_mpi_communicator.cpp — dist::mpi_world on 2 ranks (mpirun on loopback): ranks and world size,
// all_reduce (sum, mean; float32, float64, int32, int64; blocking and several at once) gives every rank
// the same bits and the exact expected values, broadcast and barrier, bad tensors refused before any
// communication, and a rank that never joins a collective makes the others time out with a message and
// end the job instead of hanging.
#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

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

std::shared_ptr<dist::Communicator> world() {
  static std::shared_ptr<dist::Communicator> w = dist::mpi_world({.timeout_s = 30});
  return w;
}

// The values rank r contributes: element i is (i + 1) * 0.37 + r * 1.1 (in dtype d).
Tensor contribution(int r, int64_t n, DType d) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double(i + 1) * 0.37 + r * 1.1;
  return to_dtype(tensor(v), d);
}

// The sum over ranks 0..N-1, added in rank order in dtype d (what a reduction of 2 gives exactly).
Tensor expected_sum(int ranks, int64_t n, DType d) {
  Tensor s = contribution(0, n, d);
  for (int r = 1; r < ranks; ++r) s = s + contribution(r, n, d);
  return s;
}

}  // namespace

TEST_CASE("mpi: on two ranks all_reduce sum and mean give every rank the exact result", "[dist][mpi]") {
  auto w = world();
  REQUIRE(w->world_size() == 2);
  REQUIRE(w->name() == "mpi");
  for (DType d : {kFloat32, kFloat64, kInt32, kInt64}) {
    INFO(fmt::format("{}", d));
    const bool floating = d == kFloat32 || d == kFloat64;
    Tensor t = floating ? contribution(w->rank(), 1000, d) : to_dtype(arange(1000.0, kFloat64) + double(w->rank() * 7), d);
    w->all_reduce(t, dist::ReduceOp::Sum);
    const Tensor want = floating ? expected_sum(2, 1000, d) : to_dtype(arange(1000.0, kFloat64) * 2.0 + 7.0, d);
    CHECK(t.to_vector<double>() == want.to_vector<double>());
    if (floating) {
      Tensor m = contribution(w->rank(), 1000, d);
      w->all_reduce(m, dist::ReduceOp::Mean);
      CHECK(m.to_vector<double>() == (want * 0.5).to_vector<double>());
    }
  }
  // A 0-d tensor, a larger one (several MPI segments), an empty one.
  Tensor scalar = scalar_tensor(double(w->rank() + 1), kFloat64);
  w->all_reduce(scalar, dist::ReduceOp::Sum);
  CHECK(scalar.item<double>() == 3.0);
  Tensor big = full({3'000'001}, double(w->rank() + 1));
  w->all_reduce(big, dist::ReduceOp::Mean);
  CHECK(big.to_vector<float>() == std::vector<float>(3'000'001, 1.5f));
  Tensor none = zeros({0});
  w->all_reduce(none, dist::ReduceOp::Sum);
  CHECK(none.numel() == 0);
}

TEST_CASE("mpi: several all_reduce_async in flight complete in any wait order", "[dist][mpi]") {
  auto w = world();
  std::vector<Tensor> buckets;
  std::vector<std::unique_ptr<dist::Work>> works;
  for (int b = 0; b < 6; ++b) {
    buckets.push_back(contribution(w->rank(), 10'000 * (b + 1), kFloat32));
    works.push_back(w->all_reduce_async(buckets.back(), dist::ReduceOp::Sum));
  }
  for (int b = 5; b >= 0; --b) works[size_t(b)]->wait();  // newest first
  for (int b = 0; b < 6; ++b) {
    INFO("bucket " << b);
    CHECK(buckets[size_t(b)].to_vector<float>() == expected_sum(2, 10'000 * (b + 1), kFloat32).to_vector<float>());
  }
  // A Work dropped without wait() completes in its destructor (so MPI never writes into freed memory).
  Tensor dropped = contribution(w->rank(), 100, kFloat64);
  w->all_reduce_async(dropped, dist::ReduceOp::Sum);
  CHECK(dropped.to_vector<double>() == expected_sum(2, 100, kFloat64).to_vector<double>());
}

TEST_CASE("mpi: broadcast copies the root tensor to every rank and barrier returns on both", "[dist][mpi]") {
  auto w = world();
  for (int root : {0, 1}) {
    Tensor t = contribution(w->rank(), 777, kFloat64);
    w->broadcast(t, root);
    CHECK(t.to_vector<double>() == contribution(root, 777, kFloat64).to_vector<double>());
  }
  // a parameter (requires grad) can be broadcast: the copy is not recorded
  Tensor p = contribution(w->rank(), 5, kFloat32).requires_grad_();
  w->broadcast(p, 0);
  CHECK(p.to_vector<float>() == contribution(0, 5, kFloat32).to_vector<float>());
  CHECK(p.is_leaf());
  w->barrier();
  w->barrier();
}

TEST_CASE("mpi: bad tensors are refused before any communication", "[dist][mpi]") {
  auto w = world();
  Tensor t = contribution(w->rank(), 12, kFloat32).reshape({3, 4});
  Tensor tt = t.transpose(0, 1);
  CHECK_THROWS_WITH(w->all_reduce(tt, dist::ReduceOp::Sum), Catch::Contains("all_reduce: the tensor of shape [4, 3] is not contiguous"));
  Tensor b = gt(t, 1.0);
  CHECK_THROWS_WITH(w->all_reduce(b, dist::ReduceOp::Sum), Catch::Contains("dtype bool is not supported"));
  Tensor i = arange(4.0);
  CHECK_THROWS_WITH(w->all_reduce(i, dist::ReduceOp::Mean), Catch::Contains("the mean of a int64 tensor"));
  Tensor u;
  CHECK_THROWS_WITH(w->all_reduce(u, dist::ReduceOp::Sum), Catch::Contains("undefined"));
  CHECK_THROWS_WITH(w->broadcast(t, 2), Catch::Contains("broadcast: root 2 is not a rank of this world of size 2"));
  // after the refusals the world still works: both ranks refused the same calls
  w->all_reduce(t, dist::ReduceOp::Sum);
  CHECK(t.to_vector<float>() == expected_sum(2, 12, kFloat32).reshape({3, 4}).to_vector<float>());
}

// Expected to end the job: ctest checks the output for rank 0's message (PASS_REGULAR_EXPRESSION).
TEST_CASE("mpi: a rank that never joins a collective makes the others time out and end the job", "[dist][mpi][.timeout]") {
  auto w = dist::mpi_world({.timeout_s = 1});
  if (w->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));  // hangs; rank 0's abort ends this process
    FAIL("rank 1 was not ended by rank 0's timeout");
  }
  Tensor t = ones({4});
  const auto start = std::chrono::steady_clock::now();
  try {
    w->all_reduce(t, dist::ReduceOp::Sum);
    FAIL("the all_reduce completed without rank 1");
  } catch (const dist::TimeoutError& e) {
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank 0 timed out after %.1f s: %s\n", waited, e.what());
    std::fflush(stdout);
    CHECK(waited >= 1.0);
    CHECK(waited < 10.0);
  }
  CHECK_THROWS_WITH(w->barrier(), Catch::Contains("an earlier collective of this communicator failed"));
  // leaving: the broken world's destructor aborts the job (MPI_Abort), which also ends rank 1
}

TEST_CASE("mpi: 128 bytes from rank 0 reach every rank (how the NCCL unique id travels)", "[dist][mpi]") {
  auto w = world();
  std::array<uint8_t, 128> id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = uint8_t(w->rank() == 0 ? (i * 37 + 11) & 0xff : 0xee);
  dist::broadcast_bytes(*w, id, 0);
  for (size_t i = 0; i < id.size(); ++i) {
    INFO("byte " << i);
    REQUIRE(id[i] == uint8_t((i * 37 + 11) & 0xff));
  }
  std::array<uint8_t, 5> odd{};  // not a multiple of 8
  if (w->rank() == 1) odd = {1, 2, 3, 4, 5};
  dist::broadcast_bytes(*w, odd, 1);
  CHECK(odd == std::array<uint8_t, 5>{1, 2, 3, 4, 5});
}

TEST_CASE("mpi: nccl_world says what is missing where it cannot run", "[dist][mpi]") {
  auto w = world();
  if (!dist::nccl_built()) {
    CHECK_THROWS_WITH(dist::nccl_world(w, Device::cuda(0)), Catch::Contains("this build of tapegrad has no NCCL"));
    return;
  }
  // NCCL is built: without a GPU its set-up fails on every rank with an Error naming NCCL or CUDA.
  bool gpu = true;
  try {
    (void)zeros({1}, Options().device(Device::cuda(0)));
  } catch (const Error&) {
    gpu = false;
  }
  if (!gpu) CHECK_THROWS_AS(dist::nccl_world(w, Device::cuda(0)), Error);
  CHECK_THROWS_WITH(dist::nccl_world(w, Device::cpu()), Catch::Contains("nccl_world: device cpu is not a GPU"));
}
