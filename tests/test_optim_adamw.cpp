// test_optim_adamw.cpp — AdamW against torch.optim.AdamW: the CS336 1000-step problem (float32),
// one step on the golden float64 LM references, defaults, parameter groups, state save/restore,
// and the errors for bad hyperparameters and bad parameters; also the tests' .npy reader.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/io/safetensors.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "optim/adamw.h"
#include "tests/npy_reader.h"
#include "tests/shared_fixture.h"

using namespace tapegrad;
using namespace tapegrad::optim;

namespace {

// CS336's npy fixtures and the golden LMs, under ../shared (skipped without it: tests/shared_fixture.h).
std::string cs336_npy(const std::string& file) { return testing::shared_path("data/cs336/npy/" + file); }
std::string reference(const std::string& file) { return testing::shared_path("data/reference/" + file); }

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0.0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// The CS336 test_adamw problem: W [2, 3] (nn.Linear(3, 2, bias=False) after manual_seed(42)); at
// each step x = xs[i], y = [x0 + x1, −x2], loss = Σ (y − W x)², then one optimizer step.
Tensor run_cs336_adamw() {
  Tensor w = testing::read_npy(cs336_npy("adamw_inputs/w0.npy"));
  Tensor xs = testing::read_npy(cs336_npy("adamw_inputs/xs.npy"));
  REQUIRE(w.shape() == Shape{2, 3});
  REQUIRE(xs.shape() == Shape{1000, 3});
  REQUIRE(w.dtype() == kFloat32);
  w.requires_grad_();
  AdamW opt({w}, AdamWOptions(1e-3).weight_decay(0.01).betas(0.9, 0.999).eps(1e-8));
  const std::vector<float> xv = xs.to_vector<float>();
  for (int i = 0; i < 1000; ++i) {
    opt.zero_grad();
    const float x0 = xv[3 * i], x1 = xv[3 * i + 1], x2 = xv[3 * i + 2];
    Tensor x = from_vector<float>({x0, x1, x2}, {3});
    Tensor y = from_vector<float>({x0 + x1, -x2}, {2});
    Tensor loss = pow(y - matmul(w, x), 2.0).sum();
    loss.backward();
    opt.step();
  }
  return w.detach();
}

}  // namespace

TEST_CASE("AdamW reproduces the CS336 26.x snapshot and torch.optim.AdamW after 1000 steps", "[optim][adamw]") {
  const Tensor w = run_cs336_adamw();
  const Tensor snapshot = testing::read_npy(cs336_npy("test_adamw/array.npy"));
  const Tensor torch_final = testing::read_npy(cs336_npy("adamw_inputs/torch_adamw_final.npy"));
  const Tensor legacy = testing::read_npy(cs336_npy("legacy_v1.0.6_test_adamw/array.npy"));
  const double e_snapshot = max_abs_diff(w, snapshot);
  const double e_torch = max_abs_diff(w, torch_final);
  const double e_legacy = max_abs_diff(w, legacy);
  INFO("max |w - snapshot| = " << e_snapshot << ", max |w - torch| = " << e_torch
                               << ", max |w - legacy (decay after)| = " << e_legacy);
  CHECK(e_snapshot <= 1e-4);  // the CS336 test's atol
  CHECK(e_torch <= 1e-4);
  // Measured: 6e-8 from torch (float32 rounding), 4.8e-6 from the snapshot. The snapshot comes from
  // CS336's own AdamW, which adds ε to √v instead of to √v/√(1 − β2^t) (torch), hence the larger gap.
  CHECK(e_torch <= 1e-6);
  CHECK(e_snapshot <= 1e-5);
  // The 1.0.x snapshot (decay after the Adam update) is also within 1e-4 here: lr·λ = 1e-5 is too small
  // for this problem to tell the orders apart. The golden float64 test below does (1e-5 vs 1e-12).
  WARN("CS336 AdamW max abs error: snapshot " << e_snapshot << ", torch " << e_torch << ", legacy " << e_legacy);
}

TEST_CASE("AdamW one step matches torch on the golden float64 LM references", "[optim][adamw]") {
  for (const char* file : {"lm_mha_seed0.safetensors", "lm_gqa_seed1.safetensors"}) {
    INFO(file);
    std::map<std::string, std::string> meta;
    const auto t = load_safetensors(reference(file), &meta);
    // The file records the settings it was made with; they are the ones used below.
    double lr = 0, b1 = 0, b2 = 0, eps = 0, wd = 0;
    REQUIRE(meta.contains("adamw"));
    REQUIRE(std::sscanf(meta.at("adamw").c_str(), "lr=%lf betas=(%lf,%lf) eps=%lf weight_decay=%lf", &lr, &b1, &b2,
                        &eps, &wd) == 5);
    CHECK(lr == 0.01);
    CHECK(b1 == 0.9);
    CHECK(b2 == 0.95);
    CHECK(eps == 1e-8);
    CHECK(wd == 0.1);

    std::vector<std::string> names;
    std::vector<Tensor> params;
    for (const auto& [key, value] : t) {
      if (!key.starts_with("weights.")) continue;
      const std::string name = key.substr(8);
      REQUIRE(value.dtype() == kFloat64);
      Tensor p = value.clone().requires_grad_();
      p.set_grad(t.at("grads." + name));
      names.push_back(name);
      params.push_back(p);
    }
    REQUIRE(params.size() >= 21);
    // Decay after the Adam update instead of before would move each θ by lr·λ·Δθ ≈ 1e-3·|Δθ|, far
    // above the 1e-12 checked here: this test pins torch's order (decay first).
    AdamW opt(params, AdamWOptions(lr).betas(b1, b2).eps(eps).weight_decay(wd));
    opt.step();
    double worst = 0.0;
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& expected = t.at("adamw_step1." + names[i]);
      const double e = max_abs_diff(params[i].detach(), expected);
      INFO(names[i] << ": max abs error " << e);
      CHECK(e <= 1e-12);
      worst = std::max(worst, e);
    }
    WARN(file << ": AdamW step-1 max abs error over " << params.size() << " parameters: " << worst);
  }
}

TEST_CASE("AdamW defaults are torch's and its first step is lr times sign of g plus decay", "[optim][adamw]") {
  const AdamWOptions o;
  CHECK(o.lr_ == 1e-3);
  CHECK(o.beta1_ == 0.9);
  CHECK(o.beta2_ == 0.999);
  CHECK(o.eps_ == 1e-8);
  CHECK(o.weight_decay_ == 0.01);

  // Step 1: m̂ = g, v̂ = g², so θ ← θ(1 − lr·λ) − lr·g/(|g| + ε).
  Tensor p = tensor({1.0, -2.0, 3.0}, Options(kFloat64).requires_grad());
  p.set_grad(tensor({0.5, 0.25, -4.0}, kFloat64));
  AdamW opt({p});
  opt.step();
  const auto v = p.to_vector<double>();
  const double lr = 1e-3, wd = 0.01, eps = 1e-8;
  CHECK(v[0] == Approx(1.0 * (1 - lr * wd) - lr * 0.5 / (0.5 + eps)).epsilon(1e-14));
  CHECK(v[1] == Approx(-2.0 * (1 - lr * wd) - lr * 0.25 / (0.25 + eps)).epsilon(1e-14));
  CHECK(v[2] == Approx(3.0 * (1 - lr * wd) + lr * 4.0 / (4.0 + eps)).epsilon(1e-14));
}

TEST_CASE("AdamW skips parameters without a gradient and honours parameter groups", "[optim][adamw]") {
  Tensor a = tensor({1.0, 2.0}, Options(kFloat64).requires_grad());
  Tensor b = tensor({3.0}, Options(kFloat64).requires_grad());
  Tensor c = tensor({4.0}, Options(kFloat32).requires_grad());
  AdamW opt({ParamGroup{{a, b}}, ParamGroup{{c}, 0.5, 0.0}}, AdamWOptions(0.1).weight_decay(0.2));
  CHECK(opt.num_groups() == 2);
  CHECK(opt.lr(0) == 0.1);
  CHECK(opt.lr(1) == 0.5);
  CHECK(opt.weight_decay(0) == 0.2);
  CHECK(opt.weight_decay(1) == 0.0);
  a.set_grad(tensor({1.0, -1.0}, kFloat64));
  c.set_grad(tensor({2.0}, kFloat32));
  opt.step();
  CHECK(b.item() == 3.0);  // no gradient: untouched, and no state created
  const auto va = a.to_vector<double>();
  CHECK(va[0] == Approx(1.0 * (1 - 0.1 * 0.2) - 0.1 * (1.0 / (1.0 + 1e-8))).epsilon(1e-14));
  CHECK(va[1] == Approx(2.0 * (1 - 0.1 * 0.2) + 0.1 * (1.0 / (1.0 + 1e-8))).epsilon(1e-14));
  CHECK(c.item() == Approx(4.0 - 0.5).epsilon(1e-6));  // group 1: lr 0.5, no decay
  const StateList st = opt.state();
  REQUIRE(st.size() == 6);  // parameters 0 and 2, three buffers each
  CHECK(st[0].first == "0.step");
  CHECK(st[1].first == "0.exp_avg");
  CHECK(st[2].first == "0.exp_avg_sq");
  CHECK(st[3].first == "2.step");
  CHECK(st[0].second.item() == 1.0);
  CHECK(st[4].second.dtype() == kFloat32);

  opt.set_lr(0.01);
  CHECK(opt.lr(0) == 0.01);
  CHECK(opt.lr(1) == 0.01);
  opt.set_lr(1, 0.02);
  CHECK(opt.lr(1) == 0.02);
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(c.grad().defined());
}

TEST_CASE("AdamW state round-trips: a restored optimizer continues exactly", "[optim][adamw]") {
  const auto make = [] { return randn({4, 3}, Options(kFloat64)); };
  manual_seed(7);
  Tensor p0 = make();
  std::vector<Tensor> grads = {make(), make(), make()};
  Tensor p1 = p0.clone().requires_grad_();
  AdamW first({p1}, AdamWOptions(0.05).betas(0.8, 0.9));
  for (int i = 0; i < 2; ++i) {
    p1.set_grad(grads[i]);
    first.step();
  }
  const StateList saved = first.state();
  REQUIRE(saved.size() == 3);
  CHECK(saved[0].second.item() == 2.0);

  Tensor p2 = p1.detach().clone().requires_grad_();
  AdamW second({p2}, AdamWOptions(0.05).betas(0.8, 0.9));
  second.load_state(saved);
  p1.set_grad(grads[2]);
  p2.set_grad(grads[2]);
  first.step();
  second.step();
  CHECK(max_abs_diff(p1.detach(), p2.detach()) == 0.0);
  // state() returns copies: changing them does not touch the optimizer
  StateList copy = second.state();
  copy[1].second.fill_(123.0);
  CHECK(second.state()[1].second.to_vector<double>() != copy[1].second.to_vector<double>());

  // load_state refuses state that does not fit
  AdamW third({p2.detach().clone().requires_grad_()});
  CHECK_THROWS_WITH(third.load_state({{"0.exp_avg", zeros({4, 3}, kFloat64)}}), Catch::Contains("no 'step'"));
  StateList wrong_shape = saved;
  wrong_shape[1].second = zeros({3, 4}, kFloat64);
  CHECK_THROWS_WITH(third.load_state(wrong_shape), Catch::Contains("exp_avg"));
  StateList wrong_dtype = saved;
  wrong_dtype[2].second = zeros({4, 3}, kFloat32);
  CHECK_THROWS_AS(third.load_state(wrong_dtype), Error);
  CHECK_THROWS_WITH(third.load_state({{"1.step", scalar_tensor(1.0, kFloat64)}}), Catch::Contains("1 parameters"));
  CHECK_THROWS_WITH(third.load_state({{"0.momentum", scalar_tensor(1.0, kFloat64)}}),
                    Catch::Contains("unknown state buffer"));
  CHECK_THROWS_WITH(third.load_state({{"x.step", scalar_tensor(1.0, kFloat64)}}), Catch::Contains("bad"));
  CHECK(third.state().empty());  // a failed load leaves the state as it was
}

TEST_CASE("AdamW rejects bad hyperparameters and bad parameters with clear errors", "[optim][adamw][errors]") {
  Tensor p = zeros({2}, Options().requires_grad());
  CHECK_THROWS_WITH(AdamW({p}, AdamWOptions(-1e-3)), Catch::Contains("learning rate") && Catch::Contains("-0.001"));
  CHECK_THROWS_WITH(AdamW({p}, AdamWOptions().betas(1.0, 0.999)), Catch::Contains("beta1 must be in [0, 1)"));
  CHECK_THROWS_WITH(AdamW({p}, AdamWOptions().betas(0.9, -0.1)), Catch::Contains("beta2 must be in [0, 1)"));
  CHECK_THROWS_WITH(AdamW({p}, AdamWOptions().eps(-1.0)), Catch::Contains("eps"));
  CHECK_THROWS_WITH(AdamW({p}, AdamWOptions().weight_decay(-0.1)), Catch::Contains("weight_decay"));
  CHECK_THROWS_WITH(AdamW({p}, AdamWOptions(std::nan(""))), Catch::Contains("learning rate"));
  CHECK_THROWS_WITH(AdamW(std::vector<Tensor>{}), Catch::Contains("empty parameter list"));

  Tensor frozen = zeros({2});
  CHECK_THROWS_WITH(AdamW({frozen.set_name("frozen")}), Catch::Contains("'frozen'") &&
                                                          Catch::Contains("does not require grad"));
  Tensor not_leaf = p * 2.0;
  CHECK_THROWS_WITH(AdamW({not_leaf}), Catch::Contains("not a leaf"));
  CHECK_THROWS_WITH(AdamW({p, p}), Catch::Contains("more than once"));
  CHECK_THROWS_WITH(AdamW({Tensor()}), Catch::Contains("undefined"));
  CHECK_THROWS_WITH(AdamW({ParamGroup{{p}, -1.0}}), Catch::Contains("group 0") && Catch::Contains("learning rate"));

  AdamW opt({p});
  CHECK_THROWS_AS(opt.set_lr(-1.0), Error);
  CHECK_THROWS_WITH(opt.lr(3), Catch::Contains("out of range"));
  CHECK(opt.lr() == 1e-3);  // a refused set_lr changes nothing
}

TEST_CASE("AdamW step leaves grad mode as it was and the tape catches a stale backward", "[optim][adamw]") {
  Tensor w = tensor({1.0, 2.0}, Options(kFloat64).requires_grad());
  AdamW opt({w});
  Tensor loss = (w * w).sum();
  loss.backward(Tensor(), /*retain_graph=*/true);
  opt.step();
  CHECK(GradMode::enabled());
  // w changed in place after `w * w` saved it: a second backward through that graph must throw
  CHECK_THROWS_AS(loss.backward(), Error);
}

TEST_CASE("the npy reader used by these tests refuses malformed files", "[optim][npy]") {
  std::ifstream in(cs336_npy("adamw_inputs/w0.npy"), std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(good.size() == 128 + 6 * 4);  // v1.0: 10-byte preamble + 118-byte header, 2x3 float32
  const std::string path = (std::filesystem::temp_directory_path() / "tapegrad_test_optim_npy.npy").string();
  const auto read_bytes = [&](const std::string& bytes) {
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    return testing::read_npy(path);
  };
  const Tensor w = read_bytes(good);
  CHECK(w.shape() == Shape{2, 3});
  CHECK(w.dtype() == kFloat32);
  CHECK_THROWS_WITH(testing::read_npy(path + ".missing"), Catch::Contains("cannot open"));
  CHECK_THROWS_WITH(read_bytes("\x93NUMPX" + good.substr(6)), Catch::Contains("not a .npy file"));
  CHECK_THROWS_WITH(read_bytes(good.substr(0, 9)), Catch::Contains("not a .npy file"));
  CHECK_THROWS_WITH(read_bytes(good.substr(0, good.size() - 4)), Catch::Contains("data bytes"));
  CHECK_THROWS_WITH(read_bytes(good + "xxxx"), Catch::Contains("data bytes"));
  CHECK_THROWS_WITH(read_bytes(good.substr(0, 60)), Catch::Contains("past the end"));
  std::string other = good;
  other.replace(other.find("<f4"), 3, "<i4");
  CHECK_THROWS_WITH(read_bytes(other), Catch::Contains("unsupported dtype '<i4'"));
  other = good;
  other.replace(other.find("False"), 5, "True ");
  CHECK_THROWS_WITH(read_bytes(other), Catch::Contains("Fortran"));
  other = good;
  other[6] = 9;  // format version 9
  CHECK_THROWS_WITH(read_bytes(other), Catch::Contains("version"));
  std::filesystem::remove(path);
}

TEST_CASE("AdamW fused step equals the composed step_reference over many steps", "[optim][adamw]") {
  // Two parameter groups (one without weight decay), a transposed gradient, float32 and float64:
  // the fused kernel and the composition of tensor ops must agree at every step.
  for (DType dt : {kFloat64, kFloat32}) {
    const double tol = dt == kFloat64 ? 1e-14 : 2e-6;
    Generator gen(3);
    Tensor a = randn({37, 5}, Options(dt), &gen), b = randn({5, 9}, Options(dt), &gen);
    Tensor a2 = a.clone(), b2 = b.clone();
    for (Tensor* t : {&a, &b, &a2, &b2}) t->requires_grad_(true);
    auto opts = optim::AdamWOptions(0.05).betas(0.9, 0.95).eps(1e-8).weight_decay(0.1);
    optim::AdamW fused({optim::ParamGroup{{a}}, optim::ParamGroup{{b}, std::nullopt, 0.0}}, opts);
    optim::AdamW composed({optim::ParamGroup{{a2}}, optim::ParamGroup{{b2}, std::nullopt, 0.0}}, opts);
    for (int step = 0; step < 25; ++step) {
      Tensor ga = randn({37, 5}, Options(dt), &gen), gb = randn({9, 5}, Options(dt), &gen).t();  // strided
      a.set_grad(ga), a2.set_grad(ga.clone());
      b.set_grad(gb), b2.set_grad(gb.clone());
      fused.step();
      composed.step_reference();
      const auto av = a.to_vector<double>(), av2 = a2.to_vector<double>();
      const auto bv = b.to_vector<double>(), bv2 = b2.to_vector<double>();
      double worst = 0;
      for (size_t i = 0; i < av.size(); ++i) worst = std::max(worst, std::abs(av[i] - av2[i]) / (1 + std::abs(av2[i])));
      for (size_t i = 0; i < bv.size(); ++i) worst = std::max(worst, std::abs(bv[i] - bv2[i]) / (1 + std::abs(bv2[i])));
      INFO("step " << step << " dtype " << (dt == kFloat64 ? "float64" : "float32") << " worst |Δ|/(1+|θ|) " << worst);
      REQUIRE(worst <= tol);
    }
  }
}

TEST_CASE("adamw_update_ refuses state of another shape or dtype, a step below 1, and tensors that require grad",
          "[optim][adamw][errors]") {
  const Tensor p = randn({4, 3}), g = randn({4, 3}), m = zeros({4, 3}), v = zeros({4, 3});
  const AdamWHyper h{1e-2, 0.9, 0.999, 1e-8, 0.0};
  NoGradGuard no_grad;
  const std::vector<float> before = p.to_vector<float>();
  CHECK_THROWS_WITH(adamw_update_(p, g, zeros({3, 4}), v, h, 1),
                    Catch::Contains("adamw_update_: grad and state must match the parameter float32 [4, 3], got float32 [3, 4]"));
  CHECK_THROWS_WITH(adamw_update_(p, g, m, zeros({4, 3}, kFloat64), h, 1), Catch::Contains("got float64 [4, 3]"));
  CHECK_THROWS_WITH(adamw_update_(p, randn({12}), m, v, h, 1), Catch::Contains("got float32 [12]"));
  CHECK_THROWS_WITH(adamw_update_(p, g, m, v, h, 0), Catch::Contains("adamw_update_: step must be ≥ 1, got 0"));
  CHECK_THROWS_WITH(adamw_update_(arange(3.0), arange(3.0), arange(3.0), arange(3.0), h, 1),
                    Catch::Contains("adamw_update_"));
  CHECK(p.to_vector<float>() == before);  // nothing was updated
  CHECK(m.to_vector<float>() == std::vector<float>(12, 0.0f));
  {
    GradMode::set_enabled(true);  // (restored by the guard above at scope exit)
    const Tensor leaf = randn({4, 3}, Options().requires_grad());
    CHECK_THROWS_WITH(adamw_update_(leaf, g, m, v, h, 1), Catch::Contains("requires grad; run it under NoGradGuard"));
  }
  adamw_update_(p, g, m, v, h, 1);
  CHECK(p.to_vector<float>() != before);
}
