// 07_training_loop.cpp — the learning path, chapter 7 (docs/learn/07_training_loop.md): the training
// loop of a language model in ten visible lines, then lm::Trainer running the same loop with
// checkpoints, and gradient accumulation checked against the full batch.
//
// Data: the first 64 KiB of corpus/tinystories_head.txt, tokenized byte-level (token id = byte value,
// vocabulary 256: no tokenizer to train). Model: a micro TransformerLM (2 layers, C 64, 4 heads,
// context 32, 131,904 parameters). 40 steps of 16 windows take about a second on one core.
// Writes run/ (checkpoints, metrics.jsonl, config.json, loss.svg) in the current directory.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "autograd/tapegrad.h"
#include "data/batch.h"
#include "lm/run_dir.h"
#include "lm/trainer.h"
#include "nn/loss.h"
#include "nn/transformer_lm.h"
#include "optim/adamw.h"
#include "optim/clip_grad.h"
#include "optim/lr_schedule.h"

using namespace tapegrad;

namespace {

// Every setting in one place; the hand-written loop and lm::Trainer both read these.
constexpr int64_t kSteps = 40, kBatch = 16, kContext = 32, kWarmup = 5, kPrintEvery = 10;
constexpr double kLr = 3e-3, kMinLr = 3e-4, kClip = 1.0, kWeightDecay = 0.1;
constexpr uint64_t kSeed = 1337;
// lm::Trainer draws its batches from Generator(lm::data_seed(seed)), so that the model's initial
// weights (Generator(seed)) and the data order are different streams (lm/trainer.h).

nn::TransformerLMConfig micro_config(DType dtype = kFloat32) {
  nn::TransformerLMConfig c;
  c.vocab_size = 256;  // bytes
  c.context_length = kContext;
  c.d_model = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.d_ff = 172;
  c.dtype = dtype;
  return c;
}

std::vector<uint32_t> read_bytes(const std::string& path, size_t limit) {
  std::ifstream f(path, std::ios::binary);
  TG_CHECK(f.good(), "cannot open {}", path);
  std::vector<uint32_t> ids;
  char c;
  while (ids.size() < limit && f.get(c)) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

// AdamW with weight decay on the matrices only (embeddings, linear weights), none on the RMSNorm
// gains: the same two groups lm::Trainer makes.
std::unique_ptr<optim::AdamW> make_adamw(const nn::TransformerLM& model) {
  std::vector<Tensor> matrices, gains;
  for (const auto& [name, p] : model.named_parameters()) (p.dim() >= 2 ? matrices : gains).push_back(p);
  return std::make_unique<optim::AdamW>(
      std::vector<optim::ParamGroup>{optim::ParamGroup(matrices), optim::ParamGroup(gains, std::nullopt, 0.0)},
      optim::AdamWOptions(kLr).betas(0.9, 0.95).eps(1e-8).weight_decay(kWeightDecay));
}

// The loop by hand. Returns the loss of every step.
std::vector<double> train_by_hand(const data::TokenSource& train) {
  Generator init_gen(kSeed), data_gen(lm::data_seed(kSeed));
  nn::TransformerLM model(micro_config(), &init_gen);
  std::unique_ptr<optim::AdamW> opt = make_adamw(model);
  std::printf("the loop by hand: %lld parameters, %lld steps of %lld windows x %lld tokens\n",
              (long long)model.num_parameters(), (long long)kSteps, (long long)kBatch, (long long)kContext);
  std::vector<double> losses;
  // ---- the training loop ----
  for (int64_t step = 0; step < kSteps; ++step) {
    const double lr = optim::cosine_lr(step, kLr, kMinLr, kWarmup, kSteps);   // warm-up, then cosine
    data::Batch batch = data::get_batch(train, kBatch, kContext, data_gen);   // inputs, targets [B, T]
    Tensor logits = model(batch.inputs);                                      // forward: [B, T, V]
    Tensor loss = nn::cross_entropy(logits, batch.targets);                   // mean −log p(next byte)
    opt->zero_grad();                                                         // forget the last step's .grad
    loss.backward();                                                          // every parameter's .grad
    const double norm = optim::clip_grad_norm(opt->params(), kClip);          // scale down if ‖g‖ > 1
    opt->set_lr(lr);
    opt->step();                                                              // AdamW update
    losses.push_back(loss.item<double>());
    if ((step + 1) % kPrintEvery == 0 || step == 0)
      std::printf("  step %3lld  loss %.4f  lr %.6f  grad norm %.4f\n", (long long)step + 1, losses.back(), lr, norm);
  }
  return losses;
}

// The same loop as library code, with checkpoints every 20 steps into run/checkpoints/.
std::vector<double> train_with_trainer(const data::TokenSource& train, const data::TokenSource& val,
                                       int64_t resume_from) {
  lm::TrainOptions o;
  o.batch_size = kBatch;
  o.steps = kSteps;
  o.lr = kLr;
  o.min_lr = kMinLr;
  o.warmup_steps = kWarmup;
  o.beta1 = 0.9, o.beta2 = 0.95, o.eps = 1e-8, o.weight_decay = kWeightDecay;
  o.grad_clip = kClip;
  o.seed = kSeed;
  o.out_dir = "run";
  o.checkpoint_every = 20;
  o.eval_every = 20;
  lm::Trainer trainer(micro_config(), o, train, val);
  if (resume_from > 0) trainer.resume(lm::step_checkpoint_path("run", resume_from));
  std::vector<double> losses;
  lm::TrainCallbacks cb;
  cb.on_step = [&](const lm::StepStats& s) { losses.push_back(s.loss); };
  cb.on_eval = [&](const lm::EvalStats& e) {
    std::printf("  step %3lld  validation loss %.4f\n", (long long)e.step, e.result.loss);
  };
  cb.on_checkpoint = [&](const std::string& path, int64_t) {
    std::printf("  checkpoint %s\n", std::filesystem::relative(path).generic_string().c_str());
  };
  lm::TrainResult r = trainer.run(cb);
  TG_CHECK(r.status == lm::TrainStatus::Completed, "training did not complete: {}", r.message);
  return losses;
}

// ========================= EXERCISE: gradient accumulation =========================
// Fill every parameter's .grad with the gradient of the mean loss over the whole batch, but run
// forward/backward on `micro_batches` equal slices of it, one after another (as when the batch does
// not fit in memory). Hint: .grad accumulates over backward() calls; the mean over the batch is the
// mean of the slices' means. Delete the body, write it again, run the program: MATCH or MISMATCH.
void accumulate_gradients(const nn::TransformerLM& model, const data::Batch& batch, int64_t micro_batches) {
  const int64_t rows = batch.inputs.size(0) / micro_batches;
  for (int64_t m = 0; m < micro_batches; ++m) {
    const Tensor inputs = batch.inputs.narrow(0, m * rows, rows);
    const Tensor targets = batch.targets.narrow(0, m * rows, rows);
    Tensor loss = nn::cross_entropy(model(inputs), targets);
    (loss * (1.0 / static_cast<double>(micro_batches))).backward();  // each slice adds 1/M of its mean
  }
}
// ===================================================================================

// Full batch vs 2 micro-batches on a float64 model (so the only difference is rounding, ~1e-16).
int check_accumulation(const data::TokenSource& train) {
  Generator init_gen(kSeed), data_gen(7);
  nn::TransformerLM model(micro_config(kFloat64), &init_gen);
  data::Batch batch = data::get_batch(train, kBatch, kContext, data_gen);
  nn::cross_entropy(model(batch.inputs), batch.targets).backward();
  std::vector<std::vector<double>> full;
  for (const Tensor& p : model.parameters()) full.push_back(p.grad().to_vector<double>());
  model.zero_grad();
  accumulate_gradients(model, batch, 2);
  double worst = 0, scale = 0;
  const std::vector<Tensor> params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    TG_CHECK(params[i].grad().defined(), "accumulate_gradients left parameter {} without a gradient", i);
    const std::vector<double> acc = params[i].grad().to_vector<double>();
    for (size_t j = 0; j < acc.size(); ++j) {
      worst = std::max(worst, std::abs(acc[j] - full[i][j]));
      scale = std::max(scale, std::abs(full[i][j]));
    }
  }
  const bool ok = worst <= 1e-10 * scale;
  std::printf("\ngradient accumulation, %lld windows as 2 micro-batches of %lld, float64:\n", (long long)kBatch,
              (long long)kBatch / 2);
  std::printf("  max |accumulated - full batch| / max |full batch| = %.1e: %s\n", worst / scale,
              ok ? "MATCH" : "MISMATCH");
  return ok ? 0 : 1;
}

}  // namespace

int main() {
  try {
    const std::string corpus = std::string(TAPEGRAD_SOURCE_DIR) + "/corpus/tinystories_head.txt";
    const std::vector<uint32_t> bytes = read_bytes(corpus, 64 * 1024);
    const size_t split = bytes.size() * 9 / 10;  // 90 % to train on, 10 % to validate
    const data::TokenSource train(std::span<const uint32_t>(bytes.data(), split));
    const data::TokenSource val(std::span<const uint32_t>(bytes.data() + split, bytes.size() - split));
    std::printf("data: %zu bytes of %s (byte-level tokens: id = byte)\n\n", bytes.size(),
                "corpus/tinystories_head.txt");

    const std::vector<double> by_hand = train_by_hand(train);

    std::printf("\nlm::Trainer, the same settings and seed, checkpoints into run/:\n");
    const std::vector<double> trainer = train_with_trainer(train, val, 0);
    double diff = 0;
    for (int64_t s = 0; s < kSteps; ++s) diff = std::max(diff, std::abs(by_hand[s] - trainer[s]));
    std::printf("  losses of all %lld steps equal the loop by hand: %s (max difference %.1e)\n", (long long)kSteps,
                diff == 0 ? "yes" : "no", diff);

    std::printf("\nlm::Trainer resumed from %s:\n", lm::step_checkpoint_path("run", 20).c_str());
    const std::vector<double> resumed = train_with_trainer(train, val, 20);
    double rdiff = 0;
    for (int64_t s = 20; s < kSteps; ++s) rdiff = std::max(rdiff, std::abs(resumed[s - 20] - trainer[s]));
    std::printf("  losses of steps 21..40 equal the uninterrupted run: %s\n", rdiff == 0 ? "yes" : "no");

    const int acc = check_accumulation(train);
    return diff == 0 && rdiff == 0 ? acc : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
