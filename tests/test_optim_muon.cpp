// test_optim_muon.cpp — Muon against torch.optim.Muon (golden data made by tests/data/muon/make_golden.py,
// committed beside it): float64 within 1e-10 after each of 3 steps, float32 and the bf16 iteration within
// their roundings; Newton–Schulz against the exact polar factor; the shape adjustments; the combined
// Muon + AdamW optimizer (groups, state names, all-or-nothing restore, set_lr_relative); the WSD schedule.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <string>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/io/safetensors.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "optim/combined_optimizer.h"
#include "optim/lm_optimizer.h"
#include "optim/lr_schedule.h"
#include "optim/muon.h"
#include "tests/same_bits.h"

using namespace tapegrad;
using namespace tapegrad::optim;
using tapegrad::testing::same_bits;

namespace {

const std::map<std::string, Tensor>& golden() {
  static const auto g = load_safetensors(std::string(TAPEGRAD_SOURCE_DIR) + "/tests/data/muon/muon_golden.safetensors");
  return g;
}

const std::vector<std::string> kNames = {"tall", "wide", "square"};

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0.0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

struct GoldenCase {
  std::string name;
  MuonOptions options;
  std::vector<std::vector<std::string>> groups;     // parameter names per group
  std::vector<std::pair<double, double>> overrides;  // (lr, weight decay) per group; < 0: the options'
};

// The cases of make_golden.py, with the same settings.
std::vector<GoldenCase> golden_cases() {
  return {
      {"default", MuonOptions(0.02), {kNames}, {{-1, -1}}},
      {"plain_rms",
       MuonOptions(0.01)
           .weight_decay(0.0)
           .momentum(0.9)
           .nesterov(false)
           .adjust_lr(MuonLrAdjust::MatchRmsAdamW)
           .ns_steps(3),
       {kNames},
       {{-1, -1}}},
      {"groups_spectral",
       MuonOptions(0.05).weight_decay(0.2).adjust_lr(MuonLrAdjust::SpectralUnclamped),
       {{"tall"}, {"wide", "square"}},
       {{-1, -1}, {0.01, 0.0}}},
  };
}

// Runs a case from the golden start with the golden gradients; returns the largest error over all steps.
double run_golden(const GoldenCase& c, DType dtype, const std::string& expected_case) {
  std::map<std::string, Tensor> params;
  for (const auto& n : kNames) params[n] = golden().at("param." + n).to(dtype).detach().clone().requires_grad_();
  std::vector<ParamGroup> groups;
  for (size_t g = 0; g < c.groups.size(); ++g) {
    std::vector<Tensor> ps;
    for (const auto& n : c.groups[g]) ps.push_back(params[n]);
    const auto [lr, wd] = c.overrides[g];
    groups.emplace_back(ps, lr < 0 ? std::nullopt : std::optional<double>(lr),
                        wd < 0 ? std::nullopt : std::optional<double>(wd));
  }
  Muon opt(groups, c.options);
  double worst = 0;
  for (int k = 1; k <= 3; ++k) {
    for (const auto& n : kNames) params[n].set_grad(golden().at(fmt::format("grad.{}.step{}", n, k)).to(dtype));
    opt.step();
    for (const auto& n : kNames) {
      const double e = max_abs_diff(params[n].detach(), golden().at(fmt::format("{}.{}.step{}", expected_case, n, k)));
      INFO(c.name << " " << n << " step " << k << ": " << e);
      worst = std::max(worst, e);
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("Muon matches torch.optim.Muon after each of 3 steps: float64 within 1e-10", "[optim][muon]") {
  for (const GoldenCase& c : golden_cases()) {
    const double e = run_golden(c, kFloat64, c.name);
    INFO(c.name << ": max |θ − torch| = " << e);
    CHECK(e <= 1e-10);
  }
}

TEST_CASE("Muon in float32 matches torch.optim.Muon's float64 run within float32 rounding", "[optim][muon]") {
  for (const GoldenCase& c : golden_cases()) {
    const double e = run_golden(c, kFloat32, c.name);
    INFO(c.name << ": max |θ − torch| = " << e);
    CHECK(e <= 2e-6);  // the parameters are ~1, the updates ~0.05: a few float32 roundings
  }
}

TEST_CASE("Muon with a bf16 Newton-Schulz iteration matches torch.optim.Muon as it ships (bf16)", "[optim][muon]") {
  // torch's own bf16 run against its float64 one: the size of bf16's rounding on this problem (~8e-4).
  double torch_noise = 0;
  for (const auto& n : kNames)
    for (int k = 1; k <= 3; ++k)
      torch_noise = std::max(torch_noise, max_abs_diff(golden().at(fmt::format("bf16.{}.step{}", n, k)),
                                                       golden().at(fmt::format("default.{}.step{}", n, k))));
  GoldenCase c = golden_cases()[0];
  const double e_float32 = run_golden(c, kFloat32, "bf16");  // our float32 iteration vs torch's bf16 one
  c.options.ns_dtype(kBFloat16);
  const double e_bf16 = run_golden(c, kFloat32, "bf16");
  INFO("torch bf16 vs torch float64: " << torch_noise << "; vs torch bf16: our float32 iteration " << e_float32
                                       << ", our bf16 iteration " << e_bf16);
  CHECK(torch_noise > 1e-4);  // the golden bf16 case really is another computation than the float64 one
  // Both roundings of the same iteration differ by about as much as either differs from the exact one: bf16
  // products rounded where torch rounds, the sums formed in float32 as torch's addmm forms them.
  CHECK(e_bf16 <= 2.5 * torch_noise);
  CHECK(e_float32 <= 1.5 * torch_noise);
}

TEST_CASE("Newton-Schulz: the cubic iteration converges to the polar factor, transposes commute", "[optim][muon]") {
  Generator gen(7);
  for (const Shape& s : {Shape{8, 5}, Shape{5, 8}, Shape{6, 6}}) {
    const Tensor G = randn(s, kFloat64, &gen);
    // (1.5, −0.5, 0) is Newton–Schulz's classic cubic: it converges to U·Vᵀ for every σ in (0, √3).
    const Tensor O = newton_schulz_orthogonalize(G, {1.5, -0.5, 0.0}, 60);
    const bool tall = s[0] > s[1];
    const Tensor gram = tall ? matmul(O.t(), O) : matmul(O, O.t());  // the smaller side: the identity
    const int64_t k = std::min(s[0], s[1]);
    Tensor eye = zeros({k, k}, kFloat64);
    for (int64_t i = 0; i < k; ++i) eye.narrow(0, i, 1).narrow(1, i, 1).fill_(1.0);
    INFO(fmt::format("{}", s));
    CHECK(max_abs_diff(gram, eye) < 1e-12);
    // U·Vᵀ keeps G's singular vectors: Oᵀ·G = V·S·Vᵀ (or G·Oᵀ = U·S·Uᵀ) is symmetric.
    const Tensor sym = tall ? matmul(O.t(), G) : matmul(G, O.t());
    CHECK(max_abs_diff(sym, sym.t()) < 1e-12);
    // The quintic of Muon works on the transpose of a tall matrix: NS(Gᵀ) = NS(G)ᵀ, bit for bit (a square
    // one is iterated as it is: equal up to rounding).
    if (s[0] != s[1]) CHECK(same_bits(newton_schulz_orthogonalize(G.t()), newton_schulz_orthogonalize(G).t()));
    else CHECK(max_abs_diff(newton_schulz_orthogonalize(G.t()), newton_schulz_orthogonalize(G).t()) < 1e-12);
    // Muon's quintic does not converge to 1 but lands every singular value near it: OᵀO's diagonal.
    const Tensor Q = newton_schulz_orthogonalize(G);
    const auto d = (tall ? matmul(Q.t(), Q) : matmul(Q, Q.t())).to_vector<double>();
    for (int64_t i = 0; i < k; ++i) {
      CHECK(d[size_t(i * k + i)] > 0.3);
      CHECK(d[size_t(i * k + i)] < 1.6);
    }
  }
  // A zero matrix stays zero (ε keeps the division finite).
  const Tensor Z = newton_schulz_orthogonalize(zeros({3, 4}, kFloat64));
  CHECK(Z.abs().sum().item<double>() == 0.0);
  CHECK_THROWS_WITH(newton_schulz_orthogonalize(zeros({3}, kFloat64)), Catch::Contains("needs a 2-D matrix"));
  CHECK_THROWS_WITH(newton_schulz_orthogonalize(zeros({2, 2}), kNewtonSchulzCoefficients, 100),
                    Catch::Contains("steps must be in [0, 100)"));
}

TEST_CASE("Newton-Schulz: the Gram form equals the direct iteration (float64 1e-12, float32 at its rounding)",
          "[optim][muon]") {
  Generator gen(8);
  // Wide and tall (iterated as the transpose), a batch of several, 1 to 6 steps; a matrix with a tiny singular
  // value (rank 3 + 1e-6 noise) too.
  const Tensor low_rank = matmul(randn({16, 3}, kFloat64, &gen), randn({3, 48}, kFloat64, &gen)) +
                          randn({16, 48}, kFloat64, &gen) * 1e-6;
  const std::vector<Tensor> Gs{randn({16, 48}, kFloat64, &gen), randn({40, 8}, kFloat64, &gen),
                               randn({16, 48}, kFloat64, &gen), low_rank};
  for (int steps : {1, 2, 5, 6}) {
    INFO("steps " << steps);
    const auto direct = newton_schulz_orthogonalize_many(Gs, kNewtonSchulzCoefficients, steps, kNewtonSchulzEps,
                                                         std::nullopt, NewtonSchulzForm::Direct);
    const auto gram = newton_schulz_orthogonalize_many(Gs, kNewtonSchulzCoefficients, steps, kNewtonSchulzEps,
                                                       std::nullopt, NewtonSchulzForm::Gram);
    for (size_t i = 0; i < Gs.size(); ++i) CHECK(max_abs_diff(gram[i], direct[i]) < 1e-12);
    // float32: the Gram form differs from the exact (float64) result by about as much as the direct one does.
    std::vector<Tensor> G32;
    for (const Tensor& G : Gs) G32.push_back(G.to(kFloat32));
    const auto direct32 = newton_schulz_orthogonalize_many(G32, kNewtonSchulzCoefficients, steps, kNewtonSchulzEps,
                                                           std::nullopt, NewtonSchulzForm::Direct);
    const auto gram32 = newton_schulz_orthogonalize_many(G32, kNewtonSchulzCoefficients, steps, kNewtonSchulzEps,
                                                         std::nullopt, NewtonSchulzForm::Gram);
    for (size_t i = 0; i < Gs.size(); ++i) {
      const double e_direct = max_abs_diff(direct32[i].to(kFloat64), direct[i]);
      const double e_gram = max_abs_diff(gram32[i].to(kFloat64), direct[i]);
      INFO("matrix " << i << ": direct " << e_direct << ", gram " << e_gram);
      CHECK(e_gram < 1e-4);
      CHECK(e_gram < 30 * std::max(e_direct, 1e-7));
    }
  }
  // Auto: the Gram form for the wide 16×48 (and the tall 40×8's transpose), the direct one for a square matrix.
  const Tensor S = randn({12, 12}, kFloat64, &gen);
  CHECK(same_bits(newton_schulz_orthogonalize(S, kNewtonSchulzCoefficients, 5, kNewtonSchulzEps, std::nullopt,
                                              NewtonSchulzForm::Auto),
                  newton_schulz_orthogonalize(S)));
  CHECK(same_bits(newton_schulz_orthogonalize(Gs[0], kNewtonSchulzCoefficients, 5, kNewtonSchulzEps, std::nullopt,
                                              NewtonSchulzForm::Auto),
                  newton_schulz_orthogonalize(Gs[0], kNewtonSchulzCoefficients, 5, kNewtonSchulzEps, std::nullopt,
                                              NewtonSchulzForm::Gram)));
}

TEST_CASE("Muon: the lr adjustments by shape, and bad settings", "[optim][muon][errors]") {
  CHECK(muon_adjusted_lr(1.0, MuonLrAdjust::Original, 6, 4) == Approx(std::sqrt(1.5)).epsilon(1e-15));
  CHECK(muon_adjusted_lr(1.0, MuonLrAdjust::Original, 4, 6) == 1.0);
  CHECK(muon_adjusted_lr(2.0, MuonLrAdjust::MatchRmsAdamW, 4, 9) == Approx(2.0 * 0.2 * 3.0).epsilon(1e-15));
  CHECK(muon_adjusted_lr(1.0, MuonLrAdjust::SpectralUnclamped, 4, 16) == Approx(0.5).epsilon(1e-15));
  CHECK(parse_muon_lr_adjust("match_rms_adamw") == MuonLrAdjust::MatchRmsAdamW);
  CHECK_THROWS_WITH(parse_muon_lr_adjust("rms"), Catch::Contains("original, match_rms_adamw or spectral_unclamped"));
  Tensor gain = ones({4}).requires_grad_();
  gain.set_name("ln.weight");
  CHECK_THROWS_WITH(Muon({gain}), Catch::Contains("'ln.weight'") && Catch::Contains("2-D weight matrices only"));
  Tensor w = ones({2, 2}).requires_grad_();
  CHECK_THROWS_WITH(Muon({w}, MuonOptions().momentum(1.0)), Catch::Contains("momentum must be < 1"));
  CHECK_THROWS_WITH(Muon({w}, MuonOptions(-1.0)), Catch::Contains("learning rate"));
}

TEST_CASE("make_lm_optimizer: Muon for the hidden matrices, AdamW for the rest, as one optimizer", "[optim][muon]") {
  Generator gen(3);
  auto param = [&](Shape s) { return randn(s, kFloat64, &gen).requires_grad_(); };
  const std::vector<NamedParameter> named = {{"emb", param({10, 4}), false},
                                             {"layers.0.w", param({6, 4}), true},
                                             {"layers.0.g", param({4}), false},
                                             {"layers.0.v", param({4, 6}), true},
                                             {"head", param({10, 4}), false}};
  LmOptimizerSettings s;
  s.adamw = AdamWOptions(1e-3).weight_decay(0.1);
  s.muon = MuonOptions(0.02).weight_decay(0.0);
  SECTION("adamw: two groups, matrices with decay") {
    auto opt = make_lm_optimizer(named, s);
    CHECK(opt->kind() == "AdamW");
    REQUIRE(opt->num_groups() == 2);
    CHECK(opt->param_groups()[0].params.size() == 4);
    CHECK(opt->weight_decay(1) == 0.0);
  }
  SECTION("muon: Muon's group first, then AdamW's; state, restore and relative lr") {
    s.kind = OptimizerKind::Muon;
    auto opt = make_lm_optimizer(named, s);
    CHECK(opt->kind() == "Muon+AdamW");
    REQUIRE(opt->num_groups() == 3);
    CHECK(opt->param_groups()[0].params.size() == 2);  // layers.0.w, layers.0.v
    CHECK(opt->lr(0) == 0.02);
    CHECK(opt->lr(1) == 1e-3);
    CHECK(opt->weight_decay(2) == 0.0);
    CHECK(opt->fixed_hyperparameters().at("muon.momentum") == 0.95);
    CHECK(opt->fixed_hyperparameters().at("adamw.beta1") == 0.9);
    // The schedule's lr for the reference (AdamW's) moves Muon's in proportion.
    opt->set_lr_relative(5e-4, 1e-3);
    CHECK(opt->lr(1) == 5e-4);
    CHECK(opt->lr(0) == Approx(0.01).epsilon(1e-15));
    auto set_grads = [&](int k) {
      Generator g(100 + uint64_t(k));
      for (const auto& p : named) Tensor(p.tensor).set_grad(randn(p.tensor.shape(), kFloat64, &g));
    };
    set_grads(1);
    opt->step();
    // Flat indices count through the parts: Muon's 2 parameters, then AdamW's 3.
    std::set<std::string> names;
    for (const auto& [n, t] : opt->state()) names.insert(n);
    CHECK(names == std::set<std::string>{"0.momentum_buffer", "1.momentum_buffer", "2.step", "2.exp_avg",
                                         "2.exp_avg_sq", "3.step", "3.exp_avg", "3.exp_avg_sq", "4.step",
                                         "4.exp_avg", "4.exp_avg_sq"});
    // A copy restored from state() takes the same next step, bit for bit.
    std::vector<NamedParameter> twin;
    for (const auto& p : named) twin.push_back({p.name, p.tensor.detach().clone().requires_grad_(), p.hidden_matrix});
    auto opt2 = make_lm_optimizer(twin, s);
    opt2->load_state(opt->state());
    for (size_t g = 0; g < opt->num_groups(); ++g) opt2->set_lr(g, opt->lr(g));
    set_grads(2);
    for (size_t i = 0; i < named.size(); ++i) twin[i].tensor.set_grad(named[i].tensor.grad().clone());
    opt->step();
    opt2->step();
    for (size_t i = 0; i < named.size(); ++i) {
      INFO(named[i].name);
      CHECK(same_bits(named[i].tensor.detach(), twin[i].tensor.detach()));
    }
    // All or nothing: a state whose AdamW part is bad leaves the Muon part as it was.
    StateList bad = opt->state();
    const StateList before = opt2->state();
    for (auto& [n, t] : bad)
      if (n == "3.exp_avg") t = zeros({7}, kFloat64);
    for (auto& [n, t] : bad)
      if (n == "0.momentum_buffer") t = t + 1.0;
    CHECK_THROWS_WITH(opt2->load_state(bad), Catch::Contains("exp_avg"));
    const StateList after = opt2->state();
    REQUIRE(after.size() == before.size());
    for (size_t i = 0; i < after.size(); ++i) CHECK(same_bits(after[i].second, before[i].second));
    CHECK_THROWS_WITH(opt2->load_state({{"11.step", scalar_tensor(1.0, kFloat64)}}), Catch::Contains("5 parameters"));
  }
  CHECK(parse_optimizer_kind("muon") == OptimizerKind::Muon);
  CHECK_THROWS_WITH(parse_optimizer_kind("sgd"), Catch::Contains("--optimizer must be adamw or muon"));
}

TEST_CASE("wsd_lr: warm-up, stable, linear decay to lr_min over the last D steps", "[optim][schedule]") {
  // T = 10, D = 4, T_w = 2: 0, 0.5, 1, 1, 1, 1, then 1 − 0.9·k/4 for k = 0..3, then 0.1.
  const std::vector<double> expect = {0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 0.775, 0.55, 0.325, 0.1, 0.1};
  for (int64_t t = 0; t < int64_t(expect.size()); ++t) {
    INFO("t = " << t);
    CHECK(wsd_lr(t, 1.0, 0.1, 2, 10, 4) == Approx(expect[size_t(t)]).epsilon(1e-15));
  }
  CHECK(wsd_decay_iters(2000, 0.2) == 400);
  CHECK(wsd_decay_iters(3, 0.01) == 1);  // at least one step decays
  CHECK(wsd_decay_iters(10, 1.0) == 10);
  CHECK_THROWS_WITH(wsd_lr(0, 1.0, 0.1, 7, 10, 4), Catch::Contains("must end before the decay"));
  CHECK_THROWS_WITH(wsd_lr(0, 1.0, 0.1, 0, 10, 11), Catch::Contains("decay_iters <= total_iters"));
  CHECK_THROWS_WITH(parse_schedule_kind("linear"), Catch::Contains("--schedule must be cosine or wsd"));
}
