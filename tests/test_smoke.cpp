// test_smoke.cpp — the build links and the OpenMP build of OpenBLAS is the one loaded.
#include <catch2/catch.hpp>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/backend.h"
#include "kernels/error.h"

using namespace tapegrad;

TEST_CASE("OpenBLAS is the OpenMP build (one thread pool shared with our kernels)", "[smoke]") {
  // openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP
  CHECK(kernels::blas_parallel_model() == 2);
  CHECK(std::string(kernels::blas_core_name()).size() > 0);
  // the library actually loaded is the OpenMP variant, whatever Debian's alternatives point to
  CHECK_THAT(kernels::blas_library_path(), Catch::Contains("openblas-openmp"));
}

TEST_CASE("a tiny graph runs forward and backward", "[smoke]") {
  Tensor x = tensor({1, 2, 3}, Options(kFloat64).requires_grad());
  Tensor y = (x * x).sum();  // y = Σ x², dy/dx = 2x
  y.backward();
  CHECK(y.item() == 14.0);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 4, 6});
}

// Tensors in statics are destroyed after the thread-local allocator caches at exit; freeing them
// must not touch the dead caches. The failure is a use after free at exit, which only the
// sanitizer build (-DTAPEGRAD_SANITIZE=ON) reports; a plain build passes either way.
TEST_CASE("a tensor held in a static outlives the allocator caches safely", "[smoke]") {
  for (int i = 0; i < 3; ++i) {  // give the caches' free lists buffers of their own first
    Tensor a = randn({3, 4}), b = zeros({1 << 19});
  }
  static Tensor small = randn({3, 4});               // small-block cache + object pool
  static Tensor large = zeros({1 << 19});             // 2 MiB: the large-block cache
  static Tensor view = large.narrow(0, 10, 5);
  CHECK(small.numel() == 12);
  CHECK(view.numel() == 5);
}
