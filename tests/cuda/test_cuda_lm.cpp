// test_cuda_lm.cpp — a whole TransformerLM on cuda:0 through the same nn/optim code as on the CPU:
//  * the golden LMs (../shared/data/reference, PyTorch float64): hidden states, logits, loss and
//    every parameter gradient on cuda:0 (float64 ≤ 1e-10 relative, float32 ≤ 1e-4);
//  * training: AdamW + clipping steps on cuda:0 give the CPU's losses; a tiny model overfits one
//    batch; a CPU checkpoint resumes on cuda:0 and continues with the CPU run's losses;
//  * a training step (forward, backward, clip_grad_norm_tensor, AdamW) makes no host synchronisation
//    and, once warm, no driver allocation;
//  * lm::Trainer (the tool's `train --device cuda`) on cuda:0 gives the CPU's losses.
#include <filesystem>

#include "autograd/io/safetensors.h"
#include "lm/trainer.h"
#include "nn/loss.h"
#include "nn/transformer_lm.h"
#include "optim/adamw.h"
#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/shared_fixture.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;
using namespace tapegrad::nn;

namespace {


// max |a − e| / max |e| (a on any device).
double rel_error(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.shape() == expected.shape());
  const auto a = values(actual), e = values(expected);
  double d = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(a[i] - e[i]));
    s = std::max(s, std::abs(e[i]));
  }
  return s > 0 ? d / s : d;
}

void check_golden_on_gpu(const std::string& file, DType dtype, double tol) {
  std::map<std::string, std::string> meta;
  const auto t = load_safetensors(testing::shared_path("data/reference/" + file), &meta);
  auto num = [&](const char* k) { return std::stod(meta.at(k)); };
  TransformerLMConfig c;
  c.vocab_size = static_cast<int64_t>(num("vocab"));
  c.d_model = static_cast<int64_t>(num("d_model"));
  c.n_layers = static_cast<int64_t>(num("layers"));
  c.n_heads = static_cast<int64_t>(num("heads"));
  c.n_kv_heads = static_cast<int64_t>(num("kv_heads"));
  c.d_ff = static_cast<int64_t>(num("d_ff"));
  c.rope_theta = num("theta");
  c.eps = num("eps");
  c.context_length = static_cast<int64_t>(num("seq"));
  c.dtype = dtype;
  TransformerLM lm(c);
  StateDict weights;
  for (auto& [name, w] : t)
    if (name.rfind("weights.", 0) == 0) weights[name.substr(8)] = w;
  lm.to(gpu());
  lm.load_state_dict(weights);  // CPU tensors copied into the GPU parameters
  for (auto& [name, p] : lm.named_parameters()) REQUIRE(p.device() == gpu());
  std::vector<Tensor> hidden;
  const Tensor logits = lm.forward(t.at("inputs.token_ids").to(kInt64).to(gpu()), &hidden);
  const Tensor loss = cross_entropy(logits, t.at("inputs.targets").to(kInt64).to(gpu()));
  CHECK(logits.device() == gpu());
  for (int64_t i = 0; i < c.n_layers; ++i) {
    INFO("hidden.layers." << i);
    CHECK(rel_error(hidden[i], t.at(fmt::format("hidden.layers.{}", i))) <= tol);
  }
  CHECK(rel_error(logits, t.at("expected.logits")) <= tol);
  CHECK(rel_error(loss.reshape({1}), t.at("expected.loss")) <= tol);
  loss.backward();
  for (auto& [name, p] : lm.named_parameters()) {
    INFO("grads." << name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().device() == gpu());
    CHECK(rel_error(p.grad(), t.at("grads." + name)) <= tol);
  }
}

TransformerLMConfig tiny_config(DType dtype) {
  TransformerLMConfig c;
  c.vocab_size = 48;
  c.context_length = 16;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 64;
  c.dtype = dtype;
  return c;
}

// A fixed batch [B, T] of ids and next-token targets.
std::pair<Tensor, Tensor> fixed_batch(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> ids(static_cast<size_t>(B * (T + 1)));
  for (auto& x : ids) x = static_cast<int64_t>(g.below(static_cast<uint64_t>(V)));
  const Tensor all = from_vector<int64_t>(ids, {B, T + 1});
  return {all.narrow(1, 0, T).contiguous(), all.narrow(1, 1, T).contiguous()};
}

// One step: loss, backward, clip, AdamW. The loss stays a tensor (no read).
Tensor train_step(TransformerLM& lm, optim::AdamW& opt, const Tensor& x, const Tensor& y) {
  opt.zero_grad();
  Tensor loss = cross_entropy(lm.forward(x), y);
  loss.backward();
  optim::clip_grad_norm_tensor(lm.parameters(), 1.0);
  opt.step();
  return loss.detach();
}

}  // namespace

TEST_CASE("lm: golden LM, multi-head, float64, on cuda:0", "[cuda][lm][golden]") {
  check_golden_on_gpu("lm_mha_seed0.safetensors", kFloat64, 1e-10);
}
TEST_CASE("lm: golden LM, grouped-query, float64, on cuda:0", "[cuda][lm][golden]") {
  check_golden_on_gpu("lm_gqa_seed1.safetensors", kFloat64, 1e-10);
}
TEST_CASE("lm: golden LM, multi-head, float32, on cuda:0", "[cuda][lm][golden]") {
  check_golden_on_gpu("lm_mha_seed0.safetensors", kFloat32, 1e-4);
}
TEST_CASE("lm: golden LM, grouped-query, float32, on cuda:0", "[cuda][lm][golden]") {
  check_golden_on_gpu("lm_gqa_seed1.safetensors", kFloat32, 1e-4);
}

TEST_CASE("lm: AdamW training steps on cuda:0 give the CPU's losses", "[cuda][lm][train]") {
  for (DType dt : {kFloat64, kFloat32}) {
    INFO(dtype_name(dt));
    Generator g1(7), g2(7);
    TransformerLM cpu_lm(tiny_config(dt), &g1), gpu_lm(tiny_config(dt), &g2);
    gpu_lm.to(gpu());
    optim::AdamW cpu_opt(cpu_lm.parameters(), optim::AdamWOptions(3e-3).weight_decay(0.1));
    optim::AdamW gpu_opt(gpu_lm.parameters(), optim::AdamWOptions(3e-3).weight_decay(0.1));
    const auto [x, y] = fixed_batch(3, 16, 48, 11);
    const Tensor xg = x.to(gpu()), yg = y.to(gpu());
    for (int step = 0; step < 6; ++step) {
      const double want = train_step(cpu_lm, cpu_opt, x, y).item<double>();
      const double got = train_step(gpu_lm, gpu_opt, xg, yg).item<double>();
      INFO("step " << step << ": cpu " << want << " vs cuda " << got);
      CHECK(std::abs(want - got) <= (dt == kFloat64 ? 1e-10 : 1e-4) * std::abs(want));
    }
    for (auto& [name, p] : gpu_lm.named_parameters()) {
      INFO(name);
      CHECK(rel_error(p, cpu_lm.state_dict().at(name)) <= (dt == kFloat64 ? 1e-10 : 1e-4));
    }
  }
}

TEST_CASE("lm: a tiny model overfits one batch on cuda:0", "[cuda][lm][train]") {
  Generator g(3);
  TransformerLM lm(tiny_config(kFloat32), &g);
  lm.to(gpu());
  optim::AdamW opt(lm.parameters(), optim::AdamWOptions(1e-2));
  const auto [x, y] = fixed_batch(2, 16, 48, 5);
  const Tensor xg = x.to(gpu()), yg = y.to(gpu());
  const double first = train_step(lm, opt, xg, yg).item<double>();
  double last = first;
  for (int step = 0; step < 80; ++step) last = train_step(lm, opt, xg, yg).item<double>();
  INFO("loss " << first << " → " << last);
  CHECK(first > 3.0);   // ≈ ln 48 at initialisation
  CHECK(last < 0.3);    // memorised
}

TEST_CASE("lm: a CPU checkpoint resumes on cuda:0 and continues with the CPU run's losses", "[cuda][lm][train]") {
  const auto dir = std::filesystem::temp_directory_path() / "tapegrad_cuda_resume";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "step3.safetensors").string();
  const TransformerLMConfig c = tiny_config(kFloat32);
  const auto [x, y] = fixed_batch(2, 16, 48, 9);
  Generator g(21), rng(1);
  TransformerLM cpu_lm(c, &g);
  optim::AdamW cpu_opt(cpu_lm.parameters(), optim::AdamWOptions(3e-3).weight_decay(0.1));
  for (int step = 0; step < 3; ++step) train_step(cpu_lm, cpu_opt, x, y);
  optim::save_checkpoint(path, cpu_lm.state_dict(), cpu_opt, 3, rng, c.to_config_map());

  Generator g2(99), rng2(0);  // a different initialisation: everything must come from the file
  TransformerLM gpu_lm(c, &g2);
  gpu_lm.to(gpu());
  optim::AdamW gpu_opt(gpu_lm.parameters(), optim::AdamWOptions(3e-3).weight_decay(0.1));
  const int64_t step = optim::load_checkpoint(
      path, [&](const optim::TensorMap& m) { gpu_lm.load_state_dict(m); }, gpu_opt, rng2, c.to_config_map());
  CHECK(step == 3);
  const Tensor xg = x.to(gpu()), yg = y.to(gpu());
  for (int s = 0; s < 4; ++s) {
    const double want = train_step(cpu_lm, cpu_opt, x, y).item<double>();
    const double got = train_step(gpu_lm, gpu_opt, xg, yg).item<double>();
    INFO("step " << 3 + s << ": cpu " << want << " vs cuda " << got);
    CHECK(std::abs(want - got) <= 1e-4 * std::abs(want));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("lm: a training step on cuda:0 makes no host synchronisation and no driver allocation", "[cuda][lm][train]") {
  Generator g(4);
  TransformerLM lm(tiny_config(kFloat32), &g);
  lm.to(gpu());
  optim::AdamW opt(lm.parameters(), optim::AdamWOptions(1e-3));
  const auto [x, y] = fixed_batch(2, 16, 48, 6);
  const Tensor xg = x.to(gpu()), yg = y.to(gpu());
  Tensor loss;
  for (int i = 0; i < 2; ++i) loss = train_step(lm, opt, xg, yg);  // warm: optimizer state, cached blocks
  gpu_be().synchronize();
  const uint64_t syncs = kernels::cuda::sync_count();
  const uint64_t mallocs = kernels::cuda::memory_stats().driver_allocations;
  for (int i = 0; i < 3; ++i) loss = train_step(lm, opt, xg, yg);
  CHECK(kernels::cuda::sync_count() == syncs);
  CHECK(kernels::cuda::memory_stats().driver_allocations == mallocs);
  CHECK(std::isfinite(loss.item<double>()));  // the one read, after the steps
  CHECK(kernels::cuda::sync_count() == syncs + 1);
}

TEST_CASE("lm: the Trainer on cuda:0 (train --device cuda) gives the CPU's losses and validation loss", "[cuda][lm][train]") {
  std::vector<uint32_t> tokens(3000);
  Generator g(17);
  for (auto& t : tokens) t = static_cast<uint32_t>(g.below(48));
  const data::TokenSource train = std::span<const uint32_t>(tokens.data(), 2500);
  const data::TokenSource val = std::span<const uint32_t>(tokens.data() + 2500, 500);
  lm::TrainOptions o;
  o.batch_size = 4;
  o.steps = 5;
  o.lr = 1e-2;
  o.warmup_steps = 1;
  std::vector<double> losses[2];
  double val_loss[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    o.device = k == 0 ? Device::cpu() : gpu();
    lm::Trainer t(tiny_config(kFloat32), o, train, val);
    for (int s = 0; s < o.steps; ++s) losses[k].push_back(t.train_step().loss);
    val_loss[k] = t.evaluate().loss;
  }
  for (int s = 0; s < o.steps; ++s) {
    INFO("step " << s + 1 << ": cpu " << losses[0][s] << " vs cuda " << losses[1][s]);
    CHECK(std::abs(losses[0][s] - losses[1][s]) <= 1e-4 * std::abs(losses[0][s]));
  }
  CHECK(std::abs(val_loss[0] - val_loss[1]) <= 1e-4 * val_loss[0]);
}

TEST_CASE("lm: a Trainer step on cuda:0 synchronises once, whatever grad_accum is", "[cuda][lm][train]") {
  // The micro-batches' losses stay on the device and are read with the gradient norm after backward.
  std::vector<uint32_t> tokens(3000);
  Generator g(19);
  for (auto& t : tokens) t = static_cast<uint32_t>(g.below(48));
  const data::TokenSource train = std::span<const uint32_t>(tokens.data(), tokens.size());
  lm::TrainOptions o;
  o.batch_size = 2;
  o.grad_accum = 3;
  o.steps = 4;
  o.warmup_steps = 1;
  o.device = gpu();
  lm::Trainer t(tiny_config(kFloat32), o, train, std::nullopt);
  t.train_step();  // warm: optimizer state
  const uint64_t syncs = kernels::cuda::sync_count();
  const lm::StepStats s = t.train_step();
  CHECK(kernels::cuda::sync_count() == syncs + 1);
  CHECK(std::isfinite(s.loss));
  CHECK(std::isfinite(s.grad_norm));
}
