// main.cpp — a tiny language model end to end through tapegrad's library API:
//   1. a byte-level BPE tokenizer trained on the text (data::train_bpe: 256 byte tokens + merges),
//   2. the text encoded to token ids,
//   3. a 2-layer TransformerLM trained by lm::Trainer on random windows of those ids, minimising the
//      next-token cross-entropy  L = −(1/BT) Σ_{b,t} log softmax(logits[b,t])[target[b,t]]
//      with AdamW under a cosine learning-rate schedule,
//   4. a few tokens sampled from the trained model.
// The loss starts near ln(vocab size) (a uniform guess) and falls as the model learns the text; on
// the few hundred tokens below it ends up memorising them (pass a larger file for a real run).
// Usage: tiny_lm [text-file]   (without a file: the short text below). The last line is
// "first loss X last loss Y".
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "data/batch.h"
#include "data/bpe_trainer.h"
#include "data/tokenizer.h"
#include "lm/generate.h"
#include "lm/trainer.h"

using namespace tapegrad;

namespace {

// A short text to learn from: small, repetitive enough that a tiny model picks it up in seconds.
const char* kText = R"(The cat sat by the warm fire. The dog lay on the soft rug. The cat and the dog were friends.
In the morning the cat went out to the garden and the dog went with her. They saw a bird on the tree.
The bird sang a song for the cat and the dog. The cat liked the song. The dog liked the song too.
In the evening the cat came back to the warm fire and the dog came back to the soft rug.
The next day it was cold and it was raining. The cat did not go out. The dog did not go out.
They sat by the fire and they were happy. The bird came to the window and sang the song again.
The cat looked at the bird and the dog looked at the bird. Then the sun came out and they all went
to the garden. The cat ran and the dog ran and the bird flew over the tree. It was a good day.
)";

std::string read_text(int argc, char** argv) {
  if (argc < 2) return kText;
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot open {}", argv[1]));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string text = read_text(argc, argv);

  // 1. Tokenizer: 256 single-byte tokens + 64 merges of the most frequent adjacent pairs.
  data::BpeTrainOptions bpe;
  bpe.vocab_size = 256 + 64;
  data::Tokenizer tokenizer(data::train_bpe(text, bpe));

  // 2. The whole text as ids; the trainer draws windows of context_length + 1 from it.
  const std::vector<uint32_t> ids = tokenizer.encode(text);
  fmt::print("text: {} bytes → {} tokens (vocabulary {})\n", text.size(), ids.size(), tokenizer.vocab_size());

  // 3. The model: V → C = 64, 2 pre-norm blocks of 4-head causal attention (RoPE) + SwiGLU → V.
  nn::TransformerLMConfig config;
  config.vocab_size = int64_t(tokenizer.vocab_size());
  config.context_length = 32;
  config.d_model = 64;
  config.n_layers = 2;
  config.n_heads = 4;  // d_ff ≤ 0: 8/3·d_model rounded up to a multiple of 64

  lm::TrainOptions options;
  options.batch_size = 16;     // windows per step: 16 × 32 = 512 predicted tokens
  options.steps = 60;
  options.lr = 3e-3;           // lr(t) = min_lr + ½(lr − min_lr)(1 + cos(π t / steps)), no warm-up
  options.min_lr = 3e-4;
  options.out_dir = "";        // no run directory: no checkpoints, metrics or plot on disk
  options.seed = 1;

  lm::Trainer trainer(config, options, data::TokenSource(ids));
  double first = 0, last = 0;
  lm::TrainCallbacks callbacks;
  callbacks.on_step = [&](const lm::StepStats& s) {
    if (s.step == 1) first = s.loss;
    last = s.loss;
    if (s.step == 1 || s.step % 10 == 0 || s.step == s.steps)
      fmt::print("step {:3d}/{}  loss {:.4f}  lr {:.2e}  {:.0f} tok/s\n", s.step, s.steps, s.loss, s.lr, s.tokens_per_s);
  };
  const lm::TrainResult result = trainer.run(callbacks);
  if (result.status != lm::TrainStatus::Completed) {
    fmt::print(stderr, "training did not complete: {}\n", result.message);
    return 1;
  }

  // 4. A sample: the model continues a prompt, one token at a time from softmax(logits / 0.8).
  lm::GenerateOptions gen;
  gen.max_tokens = 40;
  gen.sampling.temperature = 0.8;
  gen.seed = 1;
  gen.sliding = true;  // the sample may run past the 32-token context
  const std::vector<uint32_t> prompt = tokenizer.encode("The cat");
  const lm::GenerateResult sample = lm::generate(trainer.model(), prompt, gen);
  fmt::print("sample: The cat{}\n", tokenizer.decode(sample.tokens));

  fmt::print("first loss {:.6f} last loss {:.6f}\n", first, last);
  return last < first ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "tiny_lm: {}\n", e.what());
  return 1;
}
