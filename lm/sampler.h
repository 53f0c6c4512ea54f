// sampler.h — choosing the next token from one row of logits (generation), the way llama.cpp and
// Hugging Face transformers apply the options, in this order:
//
//   greedy (or temperature == 0): argmax, the lowest id among equal logits; no random number used.
//   otherwise, with T the temperature and z the logits,
//     p_i = exp((z_i − max z)/T) / Σ_j exp((z_j − max z)/T)        (softmax in double)
//     top_k > 0:  keep the k highest logits (equal logits: lower id first; exactly min(k, V) kept)
//     top_p < 1:  sort the kept tokens by probability, descending, and keep the smallest prefix whose
//                 mass, renormalised over the tokens top_k kept, is ≥ top_p (at least one token)
//     renormalise over what is left and draw one token with a single Generator::uniform() u:
//       the first kept token (in draw order) whose cumulative mass exceeds u · Σ kept mass.
//
// Draw order: descending probability (equal logits: lower id first) when top_k or top_p truncated
// the vocabulary, id order when every token is kept (no sort is needed then). Every non-greedy
// sample() consumes exactly one uniform(), so the same seed gives the same ids on every machine
// (given the same logits: the generator is the project's own, sums run in a fixed order).
// Logits may be −inf (a token that can never be drawn); NaN or +inf is an error.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "autograd/generator.h"
#include "kernels/token_sampling.h"

namespace tapegrad::lm {

struct SamplerOptions {
  double temperature = 1.0;  // > 0 (0: greedy)
  int64_t top_k = 0;         // 0: off
  double top_p = 1.0;        // (0, 1]; 1: off
  bool greedy = false;

  // Throws tapegrad::Error naming the option: "--temperature must be a finite number >= 0, but is -1",
  // "--top-k must be >= 1 (0: off), but is -3", "--top-p must be in (0, 1], but is 1.5".
  void validate() const;
  bool is_greedy() const { return greedy || temperature == 0; }
  // These options as a device's sampling kernel takes them (autograd sample_token).
  kernels::TokenSampling on_device() const { return {temperature, top_k, top_p, greedy}; }
  friend bool operator==(const SamplerOptions&, const SamplerOptions&) = default;
};

// The id of a token drawn on a device (autograd sample_token's {id, status}). Throws tapegrad::Error, as
// Sampler::sample does, when the status says the row held NaN or +inf (at token `id`) or only −inf.
uint32_t drawn_token_id(double id, double status);

class Sampler {
 public:
  // Throws tapegrad::Error when the options are invalid (SamplerOptions::validate).
  Sampler(SamplerOptions options, uint64_t seed);

  // The next token id. Float and double logits of equal value give the same id (floats are widened
  // exactly). Throws tapegrad::Error when the row is empty, holds NaN or +inf, or is all −inf.
  uint32_t sample(std::span<const float> logits);
  uint32_t sample(std::span<const double> logits);

  // The (id, probability) pairs the draw chooses from, in draw order, probabilities summing to 1
  // (greedy: the argmax with probability 1). Uses no random number; allocates (for tests and tools).
  std::vector<std::pair<uint32_t, double>> distribution(std::span<const double> logits) const;
  std::vector<std::pair<uint32_t, double>> distribution(std::span<const float> logits) const;

  // The uniform the next non-greedy sample() would draw with, consumed: a device that draws the token itself
  // (lm::GraphDecoder, autograd sample_token) takes it from here, so the sampler's state moves on as if it had
  // drawn (one uniform per sampled token either way).
  double next_uniform() { return generator_.uniform(); }

  const SamplerOptions& options() const { return options_; }
  Generator::State state() const { return generator_.state(); }
  void set_state(const Generator::State& state) { generator_.set_state(state); }

  // Buffers reused across calls (a sample allocates only when the vocabulary grows).
  struct Scratch {
    std::vector<uint32_t> ids;     // candidate ids, then the kept ids in draw order
    std::vector<double> weights;   // exp((z − max z)/T) of ids[i] (unnormalised)
    std::vector<double> by_id;     // the same, indexed by id (top_p without top_k)
    std::vector<uint8_t> bucket_of;  // histogram bucket of each id (top_p without top_k)
    std::vector<std::pair<double, uint32_t>> heap;  // (logit, id) of the k best so far (top_k)
    double total = 0;              // Σ weights over the kept ids, in draw order
  };

 private:
  SamplerOptions options_;
  Generator generator_;
  Scratch scratch_;
};

}  // namespace tapegrad::lm
