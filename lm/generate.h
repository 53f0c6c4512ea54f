// generate.h — text generation from a TransformerLM with a KV cache (library code; the tool's
// `generate` only parses options and prints).
//
//   lm::GenerateOptions o;  o.max_tokens = 200;  o.sampling.temperature = 0.8;  o.stop_token = eot_id;
//   lm::GenerateResult r = lm::generate(model, prompt_ids, o, [&](uint32_t id) { print(id); });
//
// Prefill runs the whole prompt through the model in one forward (the fused causal attention) and
// fills the cache; decode then feeds one token at a time, attending to the cached prefix. No tape is
// recorded. The sampler (lm/sampler.h) draws each token from the last position's logits with the
// project's own generator: the same seed gives the same tokens on every machine.
//
// Device: everything runs where the model is (model.to(Device::cuda(0)) first): the KV cache is
// made there and the ids are copied there. Picking a token (next_token below) on a GPU happens there too
// (autograd sample_token: lm::Sampler's rules, with the uniform the host Sampler draws, one per sampled
// token as on the CPU), and one {id, status} pair comes back instead of the [V] row: the id is the host
// Sampler's unless a uniform lands within rounding (~1e-15) of a boundary between two tokens (the device
// sums the probabilities in another order), so the same seed gives the CPU's text. On a GPU each decode
// step after the prefill is one CUDA graph replay (lm/graph_decoder.h; cuda_graph = false: eager
// launches) with the same draw inside it — eager and graph decoding give the same tokens — and the ids
// come back 8 at a time.
//
// Context: while the prompt plus every generated token but the last fit the model's context_length, every
// token comes from the KV cache (exact). Past that, with `sliding` (the default), each further token is drawn
// from a fresh prefill of the last context_length tokens — the window nanoGPT's sample.py crops to — and a
// prompt longer than the context is cut to its last context_length tokens; GenerateResult::slid_tokens
// counts the tokens drawn so. Without `sliding` a request that cannot fit is refused before anything runs.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lm/sampler.h"
#include "nn/transformer_lm.h"

namespace tapegrad::lm {

struct GenerateOptions {
  int64_t max_tokens = 200;            // tokens to generate at most (≥ 1)
  SamplerOptions sampling;             // greedy, temperature, top-k, top-p
  uint64_t seed = 0;
  std::optional<uint32_t> stop_token;  // end-of-text: generation stops after producing it
  bool sliding = true;                 // past the context, re-read its last context_length tokens (see above);
                                       // false: refuse a request that cannot fit
  bool cuda_graph = true;              // on a GPU, replay each decode step as a CUDA graph (lm/graph_decoder.h)
};

struct GenerateResult {
  std::vector<uint32_t> tokens;   // generated ids (the stop token included when it was produced)
  int64_t prompt_tokens = 0;
  int64_t prefill_tokens = 0;     // tokens the prefill read: the prompt, or its last context_length with `sliding`
  double prefill_seconds = 0;     // the prompt's forward + the first sample
  double decode_seconds = 0;      // every later token (re-prefills of `sliding` included)
  int64_t decode_tokens = 0;      // tokens produced in decode_seconds
  bool stopped_at_stop_token = false;
  int64_t graph_steps = 0;        // decode steps replayed as a CUDA graph (0 on the CPU or with cuda_graph off)
  int64_t slid_tokens = 0;        // tokens drawn from a window of the last context_length tokens (0: all fit)
};

// The next token from the last position of logits [B=1, T, V] (see above): sampler.sample(row) on the CPU; on
// another device the same rules applied there (sample_token) with sampler.next_uniform() when not greedy. NaN or
// +inf in the row (or a row of −inf) is an error, and then the sampler has drawn nothing.
uint32_t next_token(Sampler& sampler, const Tensor& logits);

// Token ids as the int64 batch [1, T] a TransformerLM reads, on `device` (generate and ChatSession feed the
// model through this).
Tensor ids_as_batch(std::span<const uint32_t> ids, Device device);

// The checks generate() makes before running anything (a tool calls it before printing the prompt).
void check_generate_request(const nn::TransformerLM& model, std::span<const uint32_t> prompt,
                            const GenerateOptions& options);

// Throws tapegrad::Error (before running anything) for an empty prompt, an id outside the model's
// vocabulary (naming its position), max_tokens < 1, invalid sampling options, or a request past the
// context with `sliding` off. on_token is called with each id as soon as it is drawn.
GenerateResult generate(const nn::TransformerLM& model, std::span<const uint32_t> prompt, const GenerateOptions& options,
                        const std::function<void(uint32_t)>& on_token = {});

}  // namespace tapegrad::lm
