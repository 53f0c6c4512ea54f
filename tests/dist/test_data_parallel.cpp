// test_data_parallel.cpp — the Trainer on 2 ranks (mpirun on loopback, a micro model, seconds):
//  * 2 ranks with global batch B give the loss curve and final weights of 1 rank with batch B, within
//    float32 reduction-order tolerance (each rank's mean over B/2 windows, averaged, is not bit for bit
//    the mean over B), and the two ranks' weights are identical bit for bit after every step;
//  * the bucketed all-reduce started during backward gives the same bits as one all-reduce after it;
//  * resume of a 2-rank run from its checkpoint continues exactly (bitwise), only rank 0 writes files;
//  * a stop request on one rank stops both after the same step.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "dist/communicator.h"
#include "dist/grad_sync.h"
#include "kernels/error.h"
#include "lm/run_dir.h"
#include "lm/trainer.h"
#include "nn/loss.h"
#include "nn/transformer_lm.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<dist::Communicator> world() {
  static std::shared_ptr<dist::Communicator> w = dist::mpi_world({.timeout_s = 60});
  return w;
}

nn::TransformerLMConfig micro() {
  nn::TransformerLMConfig c;
  c.vocab_size = 64;
  c.context_length = 16;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  return c;
}

const std::vector<uint32_t>& tokens() {
  static const std::vector<uint32_t> t = [] {
    Generator g(5);
    const Tensor r = randint(0, 64, {4000}, kInt64, &g);
    std::vector<uint32_t> v;
    for (int64_t x : r.to_vector<int64_t>()) v.push_back(uint32_t(x));
    return v;
  }();
  return t;
}
data::TokenSource train_src() { return std::span<const uint32_t>(tokens()); }

lm::TrainOptions options(int64_t steps) {
  lm::TrainOptions o;
  o.batch_size = 8;  // the global batch
  o.steps = steps;
  o.lr = 1e-2;
  o.min_lr = 1e-3;
  o.warmup_steps = 1;
  o.seed = 7;
  return o;
}

std::vector<double> run_losses(lm::Trainer& t) {
  std::vector<double> losses;
  lm::TrainCallbacks cb;
  cb.on_step = [&](const lm::StepStats& s) { losses.push_back(s.loss); };
  const lm::TrainResult r = t.run(cb);
  REQUIRE(r.status == lm::TrainStatus::Completed);
  return losses;
}

// Every parameter, flattened, in float64 (exact for float32).
std::vector<double> weights(lm::Trainer& t) {
  std::vector<double> all;
  for (const auto& [name, p] : t.model().named_parameters()) {
    const auto v = p.to_vector<double>();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

// True when every rank holds exactly these values (rank 0's, broadcast, compared on each rank).
bool same_on_every_rank(const std::vector<double>& v) {
  auto w = world();
  Tensor mine = tensor(v, kFloat64);
  Tensor root = mine.clone();
  w->broadcast(root, 0);
  Tensor equal = scalar_tensor(root.to_vector<double>() == v ? 1.0 : 0.0, kFloat64);
  w->all_reduce(equal, dist::ReduceOp::Sum);
  return equal.item<double>() == double(w->world_size());
}

std::string shared_scratch(const std::string& name) {
  // rank 0 picks the directory (its pid), every rank gets it: the ranks share this machine's /tmp
  auto w = world();
  Tensor pid = scalar_tensor(double(::getpid()), kFloat64);
  w->broadcast(pid, 0);
  const fs::path dir = fs::temp_directory_path() / fmt::format("tapegrad_dist_{}_{}", int64_t(pid.item<double>()), name);
  if (w->rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  w->barrier();
  return dir.string();
}

}  // namespace

TEST_CASE("data parallel: 2 ranks with global batch 8 follow 1 rank with batch 8", "[dist][train]") {
  auto w = world();
  REQUIRE(w->world_size() == 2);
  lm::Trainer one(micro(), options(6), train_src());  // this process alone
  const std::vector<double> want = run_losses(one);
  lm::Trainer two(micro(), options(6), train_src(), std::nullopt, w);
  const std::vector<double> got = run_losses(two);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("step " << i + 1 << ": " << got[i] << " (2 ranks) vs " << want[i] << " (1 rank)");
    CHECK(std::abs(got[i] - want[i]) <= 1e-5 * std::abs(want[i]));
  }
  CHECK(got.back() < got.front());  // it learns
  const std::vector<double> w2 = weights(two), w1 = weights(one);
  REQUIRE(w2.size() == w1.size());
  double worst = 0;
  for (size_t i = 0; i < w1.size(); ++i) worst = std::max(worst, std::abs(w2[i] - w1[i]));
  CHECK(worst < 1e-4);  // AdamW's sign-like first steps amplify float32 rounding to about lr·1e-3
  CHECK(same_on_every_rank(w2));    // the replicas agree bit for bit
  CHECK(same_on_every_rank(got));   // and report the same losses
}

TEST_CASE("data parallel: buckets reduced during backward give the bits of one all_reduce after it", "[dist][train]") {
  auto w = world();
  Generator g(11);
  nn::TransformerLM lm(micro(), &g);
  const std::vector<Tensor> params = lm.parameters();
  // each rank its own batch
  Generator data(100 + uint64_t(w->rank()));
  const Tensor ids = randint(0, 64, {4, 17}, kInt64, &data);
  auto grads_with = [&](dist::GradientSyncOptions o) {
    for (Tensor p : params) p.zero_grad();
    dist::GradientSync sync(w, params, o);
    sync.begin();
    nn::cross_entropy(lm.forward(ids.narrow(1, 0, 16)), ids.narrow(1, 1, 16)).backward();
    sync.finish();
    std::vector<std::vector<float>> out;
    for (const Tensor& p : params) out.push_back(p.grad().to_vector<float>());
    return std::pair{out, std::pair{sync.num_buckets(), sync.buckets_started_during_backward()}};
  };
  const auto [plain, plain_buckets] = grads_with({.bucket_bytes = size_t(1) << 30, .overlap = false});
  const auto [bucketed, counts] = grads_with({.bucket_bytes = 4096, .overlap = true});
  CHECK(plain_buckets.first == 1);
  CHECK(counts.first > 5);                  // many small buckets
  CHECK(counts.second == counts.first);     // every one started while backward was running
  CHECK(bucketed == plain);
  // and it is the mean: rank-local gradients differ, the averaged ones agree on every rank
  std::vector<double> flat;
  for (const auto& gsl : bucketed) flat.insert(flat.end(), gsl.begin(), gsl.end());
  CHECK(same_on_every_rank(flat));
}

TEST_CASE("data parallel: a 2-rank run resumed from its checkpoint continues exactly", "[dist][train]") {
  auto w = world();
  const std::string run = shared_scratch("resume");
  lm::TrainOptions full = options(6);
  lm::Trainer ref(micro(), full, train_src(), std::nullopt, w);
  const std::vector<double> want = run_losses(ref);

  lm::TrainOptions first = options(3);
  first.cosine_steps = 6;  // the same schedule as the 6-step run
  first.out_dir = run;
  lm::Trainer a(micro(), first, train_src(), std::nullopt, w);
  const std::vector<double> head = run_losses(a);
  w->barrier();  // rank 0 has written its checkpoint
  const std::string ckpt = lm::step_checkpoint_path(run, 3);
  REQUIRE(fs::exists(ckpt));
  // only rank 0 wrote: one metrics file, checkpoints of rank 0 only (the names carry no rank)
  CHECK(fs::exists(fs::path(run) / "metrics.jsonl"));

  lm::TrainOptions rest = options(6);
  rest.out_dir = run;
  lm::Trainer b(micro(), rest, train_src(), std::nullopt, w);
  b.resume(ckpt);
  CHECK(b.step() == 3);
  const std::vector<double> tail = run_losses(b);
  std::vector<double> got = head;
  got.insert(got.end(), tail.begin(), tail.end());
  CHECK(got == want);  // bit for bit
  CHECK(same_on_every_rank(weights(b)));
  w->barrier();
  if (w->rank() == 0) fs::remove_all(run);
}

TEST_CASE("data parallel: a stop request on one rank stops both after the same step", "[dist][train]") {
  auto w = world();
  lm::Trainer t(micro(), options(10), train_src(), std::nullopt, w);
  int steps = 0;
  lm::TrainCallbacks cb;
  cb.on_step = [&](const lm::StepStats&) { ++steps; };
  cb.should_stop = [&] { return w->rank() == 1 && steps == 4; };
  const lm::TrainResult r = t.run(cb);
  CHECK(r.status == lm::TrainStatus::Stopped);
  CHECK(r.step == 4);
  CHECK(same_on_every_rank(weights(t)));
}

TEST_CASE("data parallel: a global batch that does not split evenly is refused on every rank", "[dist][train]") {
  auto w = world();
  lm::TrainOptions o = options(2);
  o.batch_size = 7;
  CHECK_THROWS_WITH(lm::Trainer(micro(), o, train_src(), std::nullopt, w),
                    Catch::Contains("--batch-size 7 (the global batch) must be a multiple of the 2 ranks"));
}
