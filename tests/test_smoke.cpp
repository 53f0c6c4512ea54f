// test_smoke.cpp — the build links and the OpenMP build of OpenBLAS is the one loaded.
#include <catch2/catch.hpp>

#include "autograd/tapegrad.h"
#include "kernels/backend.h"

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
