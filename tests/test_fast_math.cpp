// test_fast_math.cpp — the vectorizable float32 exp/tanh (kernels/fast_math.h) against libm in
// double precision, over the whole float range, including denormal results, ±inf and NaN.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kernels/fast_math.h"

using tapegrad::kernels::fast_exp;
using tapegrad::kernels::fast_tanh;

namespace {
// Error in units of the float spacing at the exact result (ulp), floored at the smallest denormal spacing.
double ulps(float got, double exact) {
  const double spacing = std::max(std::ldexp(1.0, std::ilogb(std::max(std::abs(exact), 1e-45)) - 23), 0x1p-149);
  return std::abs(double(got) - exact) / spacing;
}
}  // namespace

TEST_CASE("fast_exp is within 2 ulp of exp over the float range", "[fast_math]") {
  double worst = 0;
  float worst_x = 0;
  for (float x = -104.0f; x < 88.72f; x += 0.000731f) {
    const double u = ulps(fast_exp(x), std::exp(double(x)));
    if (u > worst) worst = u, worst_x = x;
  }
  INFO("worst at x = " << worst_x);
  CHECK(worst <= 2.0);  // measured 0.97
}

TEST_CASE("fast_exp handles the edges like libm", "[fast_math]") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(fast_exp(0.0f) == 1.0f);
  CHECK(fast_exp(89.0f) == inf);
  CHECK(fast_exp(inf) == inf);
  CHECK(fast_exp(-inf) == 0.0f);
  CHECK(fast_exp(-1e4f) == 0.0f);
  CHECK(std::isnan(fast_exp(std::nanf(""))));
  // a denormal result: e^-100 ≈ 3.72e-44
  CHECK(std::abs(double(fast_exp(-100.0f)) - std::exp(-100.0)) <= 0x1p-149);
  CHECK(std::isfinite(fast_exp(88.72f)));
}

TEST_CASE("fast_tanh is within 2 ulp of tanh and saturates exactly", "[fast_math]") {
  double worst = 0;
  float worst_x = 0;
  for (float x = -12.0f; x < 12.0f; x += 0.0000917f) {
    const double u = ulps(fast_tanh(x), std::tanh(double(x)));
    if (u > worst) worst = u, worst_x = x;
  }
  INFO("worst at x = " << worst_x);
  CHECK(worst <= 2.0);  // measured 1.22
  CHECK(fast_tanh(1e-30f) == 1e-30f);
  CHECK(fast_tanh(50.0f) == 1.0f);
  CHECK(fast_tanh(-50.0f) == -1.0f);
  CHECK(fast_tanh(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(std::isnan(fast_tanh(std::nanf(""))));
}
