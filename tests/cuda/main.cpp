// main.cpp — entry point of the CUDA cross-backend suite (tests/cuda/test_*.cpp).
//
// The suite runs wherever this build has a CUDA backend: on a real GPU (nvcc build) or on the
// emulated device (TAPEGRAD_CUDA_EMULATED, HIP-CPU on the host), and says which. An nvcc build on
// a machine without a GPU exits 77, which ctest reports as "Skipped" (not passed).
#define CATCH_CONFIG_RUNNER
#include <cstdio>
#include <cstring>

#include <catch2/catch.hpp>

#include "kernels/cuda/cuda_backend.h"

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::strncmp(argv[i], "--list", 6) == 0;
  namespace cu = tapegrad::kernels::cuda;
  if (!listing) {
    if (cu::device_count() == 0) {
      std::printf("SKIP: no CUDA device visible (this build runs its CUDA tests on a real GPU only)\n");
      return 77;
    }
    std::printf("CUDA backend tests on %s\n",
                cu::is_emulated() ? "the EMULATED device (HIP-CPU on the host: no cuBLAS, no real concurrency)"
                                  : "a real GPU");
  }
  const int failed = Catch::Session().run(argc, argv);
  // Hand the caching allocator's blocks, the cuBLAS handle and the error record back to the driver,
  // so that what compute-sanitizer's --leak-check reports at exit is memory still held by a live
  // object (a real leak).
  if (!listing && cu::device_count() > 0) cu::release_process_resources();
  return failed;
}
