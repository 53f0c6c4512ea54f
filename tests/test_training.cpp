// test_training.cpp — invariants of training a whole TransformerLM (issue 3, section 5):
// a tiny LM overfits one fixed batch (cross-entropy < 0.05 within a few hundred AdamW steps).
// (Causality — the logits at t do not change when tokens after t change — is tested in
// test_nn_modules.cpp, "TransformerLM is causal: logits at t ignore tokens after t"; resuming
// from a checkpoint bitwise in test_checkpoint.cpp.)
#include <catch2/catch.hpp>

#include <cstdint>
#include <span>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "data/batch.h"
#include "kernels/error.h"
#include "nn/loss.h"
#include "nn/transformer_lm.h"
#include "optim/adamw.h"
#include "optim/clip_grad.h"

using namespace tapegrad;
using namespace tapegrad::nn;
using namespace tapegrad::optim;

TEST_CASE("a tiny LM overfits one fixed batch to loss below 0.05 within a few hundred AdamW steps", "[training]") {
  TransformerLMConfig c;
  c.vocab_size = 64;
  c.context_length = 32;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.d_ff = 64;
  Generator g(2024);
  TransformerLM lm(c, &g);

  // One fixed batch: 8 random windows of 32 tokens (targets = the next token): 256 predictions
  // with nothing to generalise from, so a low loss means memorisation through the whole stack.
  std::vector<uint32_t> tokens(8 * 33);
  for (auto& t : tokens) t = static_cast<uint32_t>(g.below(64));
  std::vector<uint64_t> starts;
  for (uint64_t r = 0; r < 8; ++r) starts.push_back(r * 33);
  const data::Batch batch = data::batch_from_starts(std::span<const uint32_t>(tokens), starts, 32);

  AdamW opt(lm.parameters(), AdamWOptions(3e-3).betas(0.9, 0.98).weight_decay(0.0));
  const int max_steps = 300;
  double first = 0.0, loss = 0.0;
  int steps = 0;
  while (steps < max_steps) {
    opt.zero_grad();
    Tensor l = cross_entropy(lm(batch.inputs), batch.targets);  // mean over the 256 positions
    loss = l.item<double>();
    if (steps == 0) first = loss;
    if (loss < 0.05) break;
    l.backward();
    clip_grad_norm(lm.parameters(), 1.0);
    opt.step();
    ++steps;
  }
  fmt::print("overfit one batch: loss {:.4f} → {:.4f} after {} AdamW steps\n", first, loss, steps);
  CHECK(first > 3.5);  // ≈ ln 64 = 4.16 at initialisation
  CHECK(loss < 0.05);
}
