// test_cuda_memory.cpp — the CUDA backend's memory: copies both ways and on the device, the
// caching allocator's reuse (no driver allocation in steady state) and its counters, and the release
// of everything the backend keeps for the process (what a leak checker would report).
#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

TEST_CASE("memory: a tensor copied to the GPU and back is bit-identical", "[cuda]") {
  for (DType t : {kFloat32, kFloat64, kInt32, kInt64}) {
    const Tensor x = arange(0, 1000, 1.0, Options(kFloat64)).to(t);
    const Tensor g = on_cuda(x);
    CHECK(g.device() == gpu());
    CHECK(values(g) == values(x));
  }
}

TEST_CASE("memory: copy_on_device copies bytes within the device", "[cuda]") {
  const Tensor x = randn({257}, Options(kFloat32));
  const Tensor a = on_cuda(x);
  Tensor b = empty({257}, Options(kFloat32).device(gpu()));
  gpu_be().copy_on_device(b.data_ptr(), a.data_ptr(), 257 * sizeof(float));
  CHECK(values(b) == values(x));
}

TEST_CASE("memory: freed blocks are reused without new driver allocations", "[cuda]") {
  { Tensor warm = empty({1000, 1000}, Options(kFloat32).device(gpu())); }
  const auto before = kernels::cuda::memory_stats();
  for (int i = 0; i < 50; ++i) {
    Tensor t = empty({1000, 1000}, Options(kFloat32).device(gpu()));
    Tensor s = empty({7}, Options(kFloat32).device(gpu()));
  }
  const auto after = kernels::cuda::memory_stats();
  CHECK(after.driver_allocations <= before.driver_allocations + 1);  // at most the small block's first class
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.reserved_bytes >= after.allocated_bytes);
}

TEST_CASE("memory: release_process_resources frees everything, and the backend re-creates it on use", "[cuda]") {
  // Use what the backend keeps for the process: the matmul (cuBLAS handle on a real GPU) and the
  // device error record (a bad index), then release and use both again.
  auto use_backend = [] {
    const Tensor a = on_cuda(randn({8, 8})), b = on_cuda(randn({8, 8}));
    expect_close(matmul(a.to(Device::cpu()), b.to(Device::cpu())), matmul(a, b), 1e-5, 1e-5, "matmul");
    const Tensor in = on_cuda(randn({5, 4})), index = on_cuda(tensor({1, 7}, {2}, Options(kInt64)));
    Tensor out = on_cuda(zeros({2, 4}));
    gpu_be().index_select(view(out), view(in), 0, view(index));
    CHECK_THROWS_WITH(values(out), Catch::Contains("index_select") && Catch::Contains("out of range"));
  };
  use_backend();
  kernels::cuda::release_process_resources();
  const auto released = kernels::cuda::memory_stats();
  CHECK(released.allocated_bytes == 0);  // nothing of this test (or the backend) is alive
  CHECK(released.reserved_bytes == 0);
  use_backend();
}
