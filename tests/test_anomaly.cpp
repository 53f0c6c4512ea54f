// test_anomaly.cpp — anomaly detection (autograd/grad_mode.h: AnomalyMode, DetectAnomalyGuard; the
// checks in autograd/engine.cpp): a recorded op whose output is not finite throws at once, naming the
// op, its tape entry and shapes; a backward that produces a non-finite gradient throws naming the
// entry whose backward did it; without the guard nothing is checked; the guard nests and restores the
// previous state (also when an exception leaves its scope); ops under NoGradGuard are not checked.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "autograd/node.h"
#include "autograd/tapegrad.h"

using namespace tapegrad;

TEST_CASE("anomaly: a NaN forward (log of a negative number) throws naming 'log' and its tape entry", "[anomaly]") {
  REQUIRE_FALSE(AnomalyMode::enabled());
  Tensor x = tensor({1.0, 2.0, -3.0}, Options(kFloat64).requires_grad()).set_name("x");
  Tensor y = x * 1.0;  // an entry before the faulty one: the one that fails is named, not the first
  const uint64_t entry = y.grad_fn()->seq() + 1;
  DetectAnomalyGuard guard;
  REQUIRE(AnomalyMode::enabled());
  CHECK_THROWS_WITH(log(y), Catch::Contains("anomaly detection") && Catch::Contains("forward of 'log'") &&
                                Catch::Contains(fmt::format("tape entry #{};", entry)) &&
                                Catch::Contains("inputs [3]") && Catch::Contains("output [3]"));
  // Finite values pass, also through several ops.
  Tensor ok = log(exp(y) + 1.0).sum();
  CHECK(std::isfinite(ok.item<double>()));
  CHECK_NOTHROW(ok.backward());
  CHECK(std::isfinite(x.grad().to_vector<double>()[2]));
}

TEST_CASE("anomaly: the forward check reads every element (the last one, a strided view, float32, overflow)",
          "[anomaly]") {
  DetectAnomalyGuard guard;
  SECTION("NaN only in the last of 10000 elements") {
    std::vector<float> v(10000, 4.0f);
    v.back() = -1.0f;
    Tensor x = from_vector(v, {100, 100}, /*requires_grad=*/true);
    CHECK_THROWS_WITH(sqrt(x), Catch::Contains("forward of 'sqrt'") && Catch::Contains("output [100, 100]"));
  }
  SECTION("a non-contiguous output of a view op") {
    // x holds an inf at [0][2]; leaves are not checked (torch checks none either), the first op is.
    Tensor x = tensor({1, 2, std::numeric_limits<double>::infinity(), 4, 5, 6}, {2, 3}, Options().requires_grad());
    CHECK_THROWS_WITH(x.transpose(0, 1), Catch::Contains("forward of 'transpose'") &&
                                             Catch::Contains("inputs [2, 3]") && Catch::Contains("output [3, 2]"));
  }
  SECTION("float32 overflow to inf in a matmul") {
    Tensor a = full({2, 2}, 1e30, Options().requires_grad());
    Tensor b = full({2, 2}, 1e30);
    CHECK_THROWS_WITH(matmul(a, b), Catch::Contains("forward of 'matmul'") && Catch::Contains("inputs [2, 2], [2, 2]"));
    // The same numbers in float64 are finite: no error.
    Tensor a64 = full({2, 2}, 1e30, Options(kFloat64).requires_grad());
    CHECK_NOTHROW(matmul(a64, full({2, 2}, 1e30, kFloat64)));
  }
}

TEST_CASE("anomaly: a finite forward with a non-finite backward (sqrt at 0) throws from backward", "[anomaly]") {
  // d/dx sqrt(x) = 1 / (2 sqrt x) = inf at x = 0.
  auto make = [](Tensor& x, uint64_t& sqrt_entry) {
    x = tensor({0.0, 4.0}, Options(kFloat64).requires_grad()).set_name("x");
    Tensor s = sqrt(x);
    sqrt_entry = s.grad_fn()->seq();
    return (s * 3.0).sum();
  };
  Tensor x;
  uint64_t entry = 0;
  {
    DetectAnomalyGuard guard;
    Tensor loss = make(x, entry);  // the forward is finite: no error
    CHECK(loss.item<double>() == 6.0);
    CHECK_THROWS_WITH(loss.backward(), Catch::Contains("anomaly detection") &&
                                           Catch::Contains("backward of 'sqrt'") &&
                                           Catch::Contains(fmt::format("tape entry #{};", entry)) &&
                                           Catch::Contains("inputs [2]") && Catch::Contains("for input 0"));
    // The non-finite gradient never reached the leaf.
    CHECK_FALSE(x.grad().defined());
  }
  // Without the guard the same backward runs and leaves inf in the gradient.
  Tensor loss = make(x, entry);
  CHECK_NOTHROW(loss.backward());
  const std::vector<double> g = x.grad().to_vector<double>();
  CHECK(std::isinf(g[0]));
  CHECK(g[1] == 3.0 * 0.25);
}

TEST_CASE("anomaly: without the guard neither a NaN forward nor an inf backward throws", "[anomaly]") {
  REQUIRE_FALSE(AnomalyMode::enabled());
  Tensor x = tensor({-1.0, 0.0}, Options(kFloat64).requires_grad());
  Tensor y;
  REQUIRE_NOTHROW(y = log(x));
  const std::vector<double> v = y.to_vector<double>();
  CHECK(std::isnan(v[0]));
  CHECK(std::isinf(v[1]));
  CHECK_NOTHROW(y.sum().backward());  // d log x = 1/x: -1 and inf
  CHECK(std::isinf(x.grad().to_vector<double>()[1]));
  // DetectAnomalyGuard(false) turns it off explicitly.
  DetectAnomalyGuard off(false);
  CHECK_NOTHROW(log(x));
}

TEST_CASE("anomaly: guards nest and restore the previous state, also when an exception leaves the scope",
          "[anomaly]") {
  REQUIRE_FALSE(AnomalyMode::enabled());
  Tensor x = tensor({-1.0}, Options().requires_grad());
  {
    DetectAnomalyGuard outer;
    CHECK(AnomalyMode::enabled());
    {
      DetectAnomalyGuard inner(false);
      CHECK_FALSE(AnomalyMode::enabled());
      CHECK_NOTHROW(log(x));
      {
        DetectAnomalyGuard innermost;
        CHECK(AnomalyMode::enabled());
        CHECK_THROWS_AS(log(x), Error);
      }
      CHECK_FALSE(AnomalyMode::enabled());
    }
    CHECK(AnomalyMode::enabled());
    CHECK_THROWS_AS(log(x), Error);
  }
  CHECK_FALSE(AnomalyMode::enabled());

  try {
    DetectAnomalyGuard guard;
    (void)log(x);
  } catch (const Error&) {
  }
  CHECK_FALSE(AnomalyMode::enabled());

  // Per thread: another thread does not see this thread's setting.
  DetectAnomalyGuard guard;
  bool other = true;
  std::thread t([&] { other = AnomalyMode::enabled(); });
  t.join();
  CHECK_FALSE(other);
  CHECK(AnomalyMode::enabled());
}

TEST_CASE("anomaly: ops under NoGradGuard record nothing and are not checked", "[anomaly]") {
  DetectAnomalyGuard guard;
  Tensor x = tensor({-1.0, 4.0}, Options().requires_grad());
  {
    NoGradGuard no_grad;
    Tensor y;
    REQUIRE_NOTHROW(y = log(x));
    CHECK_FALSE(y.grad_fn());
    CHECK(std::isnan(y.to_vector<double>()[0]));
  }
  // Inputs that need no gradient record nothing either.
  Tensor c = tensor({-1.0});
  CHECK_NOTHROW(log(c));
  // With grad on again it is checked.
  CHECK_THROWS_WITH(log(x), Catch::Contains("'log'"));
}
