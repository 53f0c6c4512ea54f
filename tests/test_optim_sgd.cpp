// test_optim_sgd.cpp — SGD (torch.optim.SGD semantics) against hand-computed steps, its state,
// and its errors.
#include <catch2/catch.hpp>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "optim/sgd.h"

using namespace tapegrad;
using namespace tapegrad::optim;

TEST_CASE("SGD with momentum and weight decay follows a hand-computed 3-step sequence", "[optim][sgd]") {
  // loss = ½ Σ θ², so g = θ. lr 0.1, μ 0.9, λ 0.1, θ0 = [1, −2]; d = g + λθ = 1.1θ:
  //  step 1: d = [1.1, −2.2]      buf = d = [1.1, −2.2]                 θ = [0.89, −1.78]
  //  step 2: d = [0.979, −1.958]  buf = 0.9·buf + d = [1.969, −3.938]   θ = [0.6931, −1.3862]
  //  step 3: d = [0.76241, ...]   buf = [2.53451, −5.06902]             θ = [0.439649, −0.879298]
  Tensor w = tensor({1.0, -2.0}, Options(kFloat64).requires_grad());
  SGD opt({w}, SGDOptions(0.1).momentum(0.9).weight_decay(0.1));
  const std::vector<std::vector<double>> expected = {{0.89, -1.78}, {0.6931, -1.3862}, {0.439649, -0.879298}};
  const std::vector<double> expected_buf = {1.1, 1.969, 2.53451};
  for (int s = 0; s < 3; ++s) {
    opt.zero_grad();
    (0.5 * (w * w).sum()).backward();
    opt.step();
    const auto v = w.to_vector<double>();
    CHECK(std::abs(v[0] - expected[s][0]) < 1e-12);
    CHECK(std::abs(v[1] - expected[s][1]) < 1e-12);
    const StateList st = opt.state();
    REQUIRE(st.size() == 1);
    CHECK(st[0].first == "0.momentum_buffer");
    CHECK(std::abs(st[0].second.to_vector<double>()[0] - expected_buf[s]) < 1e-12);
  }
}

TEST_CASE("SGD without momentum is theta minus lr times g and keeps no state", "[optim][sgd]") {
  Tensor w = tensor({1.0f, 2.0f, 3.0f}, Options(kFloat32).requires_grad());
  Tensor unused = zeros({2}, Options().requires_grad());
  SGD opt({w, unused}, SGDOptions(0.5));
  w.set_grad(tensor({0.5, -1.0, 2.0}, kFloat32));
  opt.step();
  CHECK(w.to_vector<float>() == std::vector<float>{0.75f, 2.5f, 2.0f});
  CHECK(unused.to_vector<float>() == std::vector<float>{0.0f, 0.0f});
  CHECK(opt.state().empty());
}

TEST_CASE("SGD momentum state round-trips and bad input is refused", "[optim][sgd][errors]") {
  Tensor a = tensor({1.0, 2.0}, Options(kFloat64).requires_grad());
  SGD first({a}, SGDOptions(0.1).momentum(0.5));
  a.set_grad(tensor({1.0, 1.0}, kFloat64));
  first.step();
  Tensor b = a.detach().clone().requires_grad_();
  SGD second({b}, SGDOptions(0.1).momentum(0.5));
  second.load_state(first.state());
  a.set_grad(tensor({2.0, -3.0}, kFloat64));
  b.set_grad(tensor({2.0, -3.0}, kFloat64));
  first.step();
  second.step();
  CHECK(a.to_vector<double>() == b.to_vector<double>());
  CHECK_THROWS_WITH(second.load_state({{"0.momentum_buffer", zeros({3}, kFloat64)}}),
                    Catch::Contains("momentum_buffer of parameter 0"));
  SGD plain({b}, SGDOptions(0.1));
  CHECK_THROWS_WITH(plain.load_state(first.state()), Catch::Contains("momentum is 0"));

  Tensor p = zeros({2}, Options().requires_grad());
  CHECK_THROWS_WITH(SGD({p}, SGDOptions(-0.1)), Catch::Contains("learning rate"));
  CHECK_THROWS_WITH(SGD({p}, SGDOptions(0.1).momentum(-0.9)), Catch::Contains("momentum"));
  CHECK_THROWS_WITH(SGD({p}, SGDOptions(0.1).weight_decay(-1.0)), Catch::Contains("weight_decay"));
  CHECK_THROWS_WITH(SGD({zeros({2})}, SGDOptions(0.1)), Catch::Contains("does not require grad"));
  CHECK_THROWS_WITH(SGD({p + 1.0}, SGDOptions(0.1)), Catch::Contains("not a leaf"));
  CHECK_THROWS_WITH(SGD({zeros({2}, kInt64)}, SGDOptions(0.1)), Catch::Contains("float32 and float64"));
}
