// test_cuda_memory.cpp — the CUDA backend's memory: copies both ways and on the device, the
// caching allocator's reuse (no driver allocation in steady state) and its counters, and the release
// of everything the backend keeps for the process (what a leak checker would report).
#include <algorithm>
#include <vector>

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

TEST_CASE("memory: host-to-device copies may reuse their source at once, any size, many in flight", "[cuda]") {
  // On a GPU small copies go through pinned staging blocks and return before the DMA has run: the
  // source is overwritten right after each copy, and the device must still hold what was copied.
  // Sizes from 1 byte past a staging block (64 KiB) to past the largest staged copy (32 MiB).
  const size_t sizes[] = {1, 4096, (size_t(64) << 10) + 4, size_t(3) << 20, (size_t(32) << 20) + 64};
  for (size_t bytes : sizes) {
    INFO("bytes " << bytes);
    const size_t n = bytes / sizeof(float) + 1;
    std::vector<Tensor> copies;
    std::vector<float> source(n);
    for (int round = 0; round < 6; ++round) {
      for (size_t i = 0; i < n; ++i) source[i] = float(round * 1000003 + i);
      Tensor g = empty({int64_t(n)}, Options(kFloat32).device(gpu()));
      gpu_be().copy_from_host(g.data_ptr(), source.data(), n * sizeof(float));
      std::fill(source.begin(), source.end(), -1.0f);  // the caller reuses its buffer at once
      copies.push_back(g);
    }
    for (int round = 0; round < 6; ++round) {
      const std::vector<double> got = values(copies[size_t(round)]);
      bool same = true;
      for (size_t i = 0; i < n && same; ++i) same = got[i] == double(float(round * 1000003 + i));
      CHECK(same);
    }
  }
}
