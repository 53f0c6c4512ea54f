// test_cuda_plugin.cpp — the CUDA backend reached through its plugin (kernels/plugin_loader.h), on the device
// of this build (the emulated one in CI): kernels::backend(cuda:0) comes from the libtapegrad_cuda.so the
// loader opened, the very file this suite links for the cuda:: internals (one copy of the backend's state,
// mapped once); and with TAPEGRAD_CUDA_PLUGIN naming no file, asking for cuda:0 is one clear error while CPU
// work in the same process runs on (checked in a fresh process: this binary again, on a hidden case).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "kernels/device_memory.h"
#include "kernels/plugin_loader.h"
#include "tests/child_process.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/test_data_helpers.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;
namespace fs = std::filesystem;

TEST_CASE("plugin: cuda:0's backend is the plugin's, opened once, with one copy of its state", "[cuda]") {
  kernels::Backend& b = kernels::backend(gpu());
  CHECK(b.device() == gpu());
  const std::string path = kernels::cuda_plugin_path();
  REQUIRE_FALSE(path.empty());
  CHECK(fs::path(path).filename() == "libtapegrad_cuda.so");
  // The loader's table hands out the backend object this suite reaches directly: the same library.
  CHECK(&kernels::cuda_plugin(gpu()).backend(0) == &kernels::cuda::cuda_backend(0));
  CHECK(kernels::cuda_plugin(gpu()).emulated == kernels::cuda::is_emulated());
  CHECK(kernels::cuda_device_count() == kernels::cuda::device_count());
  // Mapped once: dlopen found the file the executable already had (no second copy of the allocator).
  const std::vector<std::string> mapped = tapegrad::testing::cuda_libraries_mapped();
  INFO("mapped: " << Catch::Detail::stringify(mapped));
  CHECK(std::count_if(mapped.begin(), mapped.end(), [](const std::string& m) {
          return fs::path(m).filename() == "libtapegrad_cuda.so";
        }) == 1);
  // The allocator's counters, through the core (kernels/device_memory.h) and directly, agree.
  const Tensor t = on_cuda(randn({256, 256}));
  const kernels::DeviceMemory m = kernels::device_memory(gpu());
  const kernels::cuda::MemoryStats s = kernels::cuda::memory_stats();
  CHECK(m.allocated_bytes == s.allocated_bytes);
  CHECK(m.reserved_bytes == s.reserved_bytes);
  CHECK(m.allocated_bytes >= 256 * 256 * sizeof(float));
}

// Run by the case below, in a process started with TAPEGRAD_CUDA_PLUGIN=/nonexistent/libtapegrad_cuda.so.
TEST_CASE("child process of the missing-plugin case", "[.cuda_plugin_missing_child]") {
  const char* env = std::getenv("TAPEGRAD_CUDA_PLUGIN");
  REQUIRE(std::string(env != nullptr ? env : "") == "/nonexistent/libtapegrad_cuda.so");
  std::string message;
  try {
    (void)kernels::backend(gpu());
  } catch (const Error& e) {
    message = e.what();
  }
  std::printf("error: %s\n", message.c_str());
  CHECK(message ==
        "device cuda:0: the CUDA backend could not be loaded (no libtapegrad_cuda.so found; tried "
        "/nonexistent/libtapegrad_cuda.so)");
  // Asked again: the same error (the outcome is kept), and the CPU works on in this process.
  CHECK_THROWS_WITH(kernels::backend(Device::cuda(0)), message);
  CHECK(kernels::cuda_device_count() == 0);
  Tensor w = randn({4, 3}, Options().requires_grad());
  const Tensor loss = sum(matmul(randn({2, 4}), w) * 2.0);
  loss.backward();
  CHECK(w.grad().defined());
  CHECK(std::isfinite(loss.item()));
}

TEST_CASE("plugin: TAPEGRAD_CUDA_PLUGIN naming no file: one clear error, and the CPU runs on", "[cuda]") {
  const tapegrad::data::testing::ScratchDir dir("cuda_plugin_missing");
  const tapegrad::testing::ChildResult r = tapegrad::testing::run_child(
      {tapegrad::testing::self_executable(), "--warn", "NoTests", "[.cuda_plugin_missing_child]"},
      {{"TAPEGRAD_CUDA_PLUGIN", "/nonexistent/libtapegrad_cuda.so"}}, dir.file("child"));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.signal == 0);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("All tests passed") && Catch::Contains("error: device cuda:0: the CUDA backend"));
}
