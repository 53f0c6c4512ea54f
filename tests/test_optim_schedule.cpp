// test_optim_schedule.cpp — cosine_lr and clip_grad_norm against the CS336 inline references
// (expected/inline_reference.json).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "optim/clip_grad.h"
#include "optim/lr_schedule.h"
#include "tests/shared_fixture.h"

using namespace tapegrad;
using namespace tapegrad::optim;

namespace {
nlohmann::json inline_reference() {
  std::ifstream in(testing::shared_path("data/cs336/expected/inline_reference.json"));
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}
}  // namespace

TEST_CASE("cosine_lr gives the 25 CS336 schedule values", "[optim][schedule]") {
  const auto ref = inline_reference().at("lr_cosine_schedule");
  const double lr_max = ref.at("max_learning_rate"), lr_min = ref.at("min_learning_rate");
  const int64_t tw = ref.at("warmup_iters"), tc = ref.at("cosine_cycle_iters");
  const auto its = ref.at("its").get<std::vector<int64_t>>();
  const auto expected = ref.at("expected").get<std::vector<double>>();
  REQUIRE(its.size() == 25);
  REQUIRE(expected.size() == 25);
  double worst = 0.0;
  for (size_t i = 0; i < its.size(); ++i) {
    const double lr = cosine_lr(its[i], lr_max, lr_min, tw, tc);
    INFO("t = " << its[i] << ": " << lr << " vs " << expected[i]);
    CHECK(std::abs(lr - expected[i]) <= 1e-7 * std::abs(expected[i]));  // numpy assert_allclose rtol 1e-7
    worst = std::max(worst, std::abs(lr - expected[i]));
  }
  WARN("cosine_lr max abs error over 25 values: " << worst);
}

TEST_CASE("cosine_lr edge cases and bad input", "[optim][schedule][errors]") {
  CHECK(cosine_lr(0, 1.0, 0.1, 0, 10) == 1.0);    // no warmup: starts at lr_max
  CHECK(cosine_lr(5, 1.0, 0.1, 5, 5) == 1.0);     // empty cosine part
  CHECK(cosine_lr(6, 1.0, 0.1, 5, 5) == 0.1);
  CHECK(cosine_lr(1000, 1.0, 0.1, 5, 10) == 0.1);
  CHECK_THROWS_WITH(cosine_lr(0, 1.0, 0.1, 10, 5), Catch::Contains("warmup_iters <= cosine_cycle_iters"));
  CHECK_THROWS_WITH(cosine_lr(-1, 1.0, 0.1, 1, 5), Catch::Contains("must be >= 0"));
}

TEST_CASE("clip_grad_norm matches the CS336 gradient clipping reference", "[optim][clip]") {
  const auto ref = inline_reference().at("gradient_clipping");
  const double expected = ref.at("expected_grad_value"), atol = ref.at("atol");
  // 6 parameters 5x5, the last frozen; loss = cat(params).sum(), so every gradient is 1.
  std::vector<Tensor> params;
  for (int i = 0; i < 6; ++i) params.push_back(randn({5, 5}, Options().requires_grad(i < 5)));
  cat(params, 0).sum().backward();
  const double norm = clip_grad_norm(params, 1e-2);
  CHECK(norm == Approx(std::sqrt(125.0)).epsilon(1e-6));  // √(5·25·1²)
  CHECK_FALSE(params[5].grad().defined());
  double worst = 0.0;
  for (int i = 0; i < 5; ++i)
    for (float g : params[i].grad().to_vector<float>()) worst = std::max(worst, std::abs(g - expected));
  CHECK(worst <= atol);
  CHECK(worst <= 1e-9);
  WARN("clip_grad_norm max abs error vs torch: " << worst);
}

TEST_CASE("clip_grad_norm leaves small gradients alone and scales float64 exactly", "[optim][clip]") {
  Tensor a = tensor({3.0}, Options(kFloat64).requires_grad());
  Tensor b = tensor({0.0, 0.0}, Options(kFloat64).requires_grad());
  a.set_grad(tensor({3.0}, kFloat64));
  b.set_grad(tensor({4.0, 0.0}, kFloat64));
  CHECK(clip_grad_norm({a, b}, 10.0) == 5.0);
  CHECK(a.grad().item() == 3.0);
  CHECK(clip_grad_norm({a, b}, 1.0) == 5.0);  // n = 5 > 1: g ← g · 1/(5 + 1e-6)
  CHECK(a.grad().item() == Approx(3.0 / (5.0 + 1e-6)).epsilon(1e-15));
  CHECK(b.grad().to_vector<double>()[0] == Approx(4.0 / (5.0 + 1e-6)).epsilon(1e-15));
  CHECK(clip_grad_norm({zeros({2}, Options().requires_grad())}, 1.0) == 0.0);  // no gradients at all
  CHECK_THROWS_WITH(clip_grad_norm({a}, -1.0), Catch::Contains("max_norm"));
}
