// test_lm_muon.cpp — the Trainer with `--optimizer muon` and `--schedule wsd`: Muon takes the blocks' matrices
// and AdamW the rest; N steps + checkpoint + resume + M steps = N+M steps bit for bit (with gradient
// accumulation); the checkpoint records Muon's state and an AdamW run refuses it; a WSD run resumed from a
// stable-phase checkpoint with more steps is the longer run exactly; a tied model starts near ln V.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <random>
#include <span>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "lm/run_dir.h"
#include "lm/trainer.h"
#include "optim/checkpoint.h"
#include "test_data_helpers.h"

using namespace tapegrad;
using tapegrad::data::testing::ScratchDir;

namespace {

bool same_bits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

nn::TransformerLMConfig config() {
  nn::TransformerLMConfig c;
  c.vocab_size = 48;
  c.context_length = 12;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 2;
  return c;
}

const std::vector<uint32_t>& tokens() {
  static const std::vector<uint32_t> t = [] {
    std::mt19937 rng(5);
    std::vector<uint32_t> v(2000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = i % 7 == 0 ? rng() % 48 : uint32_t((i * 5) % 48);  // learnable
    return v;
  }();
  return t;
}
data::TokenSource src() { return std::span<const uint32_t>(tokens()); }

lm::TrainOptions muon_options() {
  lm::TrainOptions o;
  o.batch_size = 4;
  o.grad_accum = 2;
  o.steps = 8;
  o.lr = 3e-3;
  o.min_lr = 3e-4;
  o.warmup_steps = 2;
  o.cosine_steps = 8;  // the cosine of the 8-step run, also in a shorter one
  o.seed = 9;
  o.optimizer = optim::OptimizerKind::Muon;
  o.muon_lr = 0.02;
  return o;
}

std::vector<double> losses(lm::Trainer& t) {
  std::vector<double> out;
  lm::TrainCallbacks cb;
  cb.on_step = [&](const lm::StepStats& s) { out.push_back(s.loss); };
  REQUIRE(t.run(cb).status == lm::TrainStatus::Completed);
  return out;
}

}  // namespace

TEST_CASE("Trainer --optimizer muon: learns, resumes bit for bit, and its checkpoint holds Muon's state",
          "[lm][muon]") {
  lm::TrainOptions o = muon_options();
  lm::Trainer full(config(), o, src());
  const std::vector<double> ref = losses(full);
  REQUIRE(ref.size() == 8);
  CHECK(ref.back() < ref.front() - 0.5);  // it learns the periodic part

  ScratchDir dir("lm_muon");
  const std::string run = dir.file("run");
  {
    lm::TrainOptions first = o;
    first.steps = 5;
    first.checkpoint_every = 3;
    first.out_dir = run;
    lm::Trainer t(config(), first, src());
    const std::vector<double> l = losses(t);
    for (size_t i = 0; i < l.size(); ++i) CHECK(same_bits(l[i], ref[i]));
  }
  const std::string ck3 = lm::step_checkpoint_path(run, 3);
  const optim::Checkpoint ck = optim::read_checkpoint(ck3);
  CHECK(ck.optimizer.kind == "Muon+AdamW");
  CHECK(ck.optimizer.fixed.at("muon.momentum") == 0.95);
  CHECK(ck.extra.at("train.optimizer") == "muon");
  size_t momentum_buffers = 0;
  for (const auto& [name, t] : ck.optimizer_state) momentum_buffers += name.ends_with(".momentum_buffer");
  CHECK(momentum_buffers == 2 * 7);  // 2 layers × (q, k, v, output, w1, w2, w3)
  // The groups: Muon's matrices first, then AdamW's (embedding, head) and the gains without decay.
  REQUIRE(ck.optimizer.lr.size() == 3);
  CHECK(ck.optimizer.lr[0] / ck.optimizer.lr[1] == Approx(0.02 / 3e-3).epsilon(1e-12));

  SECTION("resumed, the run continues exactly") {
    o.out_dir = run;
    lm::Trainer t(config(), o, src());
    t.resume(ck3);
    const std::vector<double> l = losses(t);
    REQUIRE(l.size() == 5);
    for (size_t i = 0; i < l.size(); ++i) {
      INFO("step " << i + 4);
      CHECK(same_bits(l[i], ref[i + 3]));
    }
  }
  SECTION("an AdamW trainer refuses the Muon checkpoint, naming both") {
    o.out_dir = dir.file("other");
    o.optimizer = optim::OptimizerKind::AdamW;
    lm::Trainer t(config(), o, src());
    CHECK_THROWS_WITH(t.resume(ck3), Catch::Contains("Muon+AdamW") && Catch::Contains("AdamW"));
  }
}

TEST_CASE("Trainer --schedule wsd: a stable-phase checkpoint resumed with more steps is the longer run", "[lm][muon]") {
  lm::TrainOptions o = muon_options();
  o.schedule = optim::ScheduleKind::Wsd;
  o.decay_fraction = 0.25;
  o.steps = 16;  // warm-up 2, stable to step 12, decay over the last 4
  lm::Trainer longer(config(), o, src());
  std::vector<double> lrs;
  std::vector<double> ref;
  lm::TrainCallbacks cb;
  cb.on_step = [&](const lm::StepStats& s) {
    ref.push_back(s.loss);
    lrs.push_back(s.lr);
  };
  REQUIRE(longer.run(cb).status == lm::TrainStatus::Completed);
  CHECK(lrs[0] == 0.0);
  CHECK(lrs[1] == Approx(1.5e-3));
  for (size_t i = 2; i < 12; ++i) CHECK(lrs[i] == 3e-3);
  CHECK(lrs[12] == 3e-3);  // t = 12: the decay's first step is still lr_max
  CHECK(lrs[15] == Approx(3e-3 - (3e-3 - 3e-4) * 3 / 4.0).epsilon(1e-12));

  ScratchDir dir("lm_wsd");
  const std::string run = dir.file("run");
  {  // the short run: 10 steps (its decay starts at step 10 − 3 = 7), a checkpoint at 4 (stable)
    lm::TrainOptions shorter = o;
    shorter.steps = 10;
    shorter.checkpoint_every = 4;
    shorter.keep_last = 5;
    shorter.out_dir = run;
    lm::Trainer t(config(), shorter, src());
    losses(t);
  }
  o.out_dir = run;  // extended to 16 steps from the stable-phase checkpoint at step 4
  lm::Trainer t(config(), o, src());
  t.resume(lm::step_checkpoint_path(run, 4));
  const std::vector<double> l = losses(t);
  REQUIRE(l.size() == 12);
  for (size_t i = 0; i < l.size(); ++i) {
    INFO("step " << i + 5);
    CHECK(same_bits(l[i], ref[i + 4]));
  }
}

TEST_CASE("A model with tied embeddings starts near ln V (the table's init is 1/√C)", "[lm][muon]") {
  nn::TransformerLMConfig c = config();
  c.tie_embeddings = true;
  c.vocab_size = 256;
  c.d_model = 128;
  lm::TrainOptions o = muon_options();
  o.steps = 1;
  o.warmup_steps = 0;
  std::vector<uint32_t> uniform(4000);
  std::mt19937 rng(3);
  for (uint32_t& v : uniform) v = rng() % 256;
  lm::Trainer t(c, o, std::span<const uint32_t>(uniform));
  const std::vector<double> l = losses(t);
  INFO("first loss " << l[0] << ", ln 256 = " << std::log(256.0));
  CHECK(std::abs(l[0] - std::log(256.0)) < 0.6);  // with N(0, 1) rows it was ~70
}

TEST_CASE("TrainOptions::validate names the Muon and WSD flags at fault", "[lm][muon][errors]") {
  auto refused = [](auto change, const std::string& what) {
    lm::TrainOptions o = muon_options();
    change(o);
    CHECK_THROWS_WITH(o.validate(), Catch::Contains(what));
  };
  refused([](lm::TrainOptions& o) { o.decay_fraction = 0; }, "--decay-fraction must be in (0, 1]");
  refused([](lm::TrainOptions& o) { o.muon_momentum = 1; }, "--muon-momentum must be in [0, 1)");
  refused([](lm::TrainOptions& o) { o.muon_lr = -1; }, "--muon-lr must be finite and >= 0");
  refused([](lm::TrainOptions& o) { o.muon_ns_steps = 100; }, "--muon-ns-steps must be in [0, 100)");
  refused([](lm::TrainOptions& o) { o.muon_weight_decay = std::nan(""); }, "--muon-weight-decay");
  refused(
      [](lm::TrainOptions& o) {
        o.schedule = optim::ScheduleKind::Wsd;
        o.steps = 10;
        o.warmup_steps = 9;
        o.cosine_steps = 0;
      },
      "--warmup-steps 9 runs into the decay");
}
