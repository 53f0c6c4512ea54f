// graph_decoder.h — decode steps replayed as one CUDA graph each (generation on a GPU).
//
//   lm::GraphDecoder decoder(model, cache, /*greedy=*/true);    // nothing captured yet
//   if (decoder.available()) next = decoder.step(next, sampler);  // cache.length() advances by 1
//
// A decode step of a small model is a couple of hundred tiny kernel launches (docs/inference.md), so eager
// decoding on a GPU is bound by the host's launch rate, not by the GPU. The step is the same work every
// token but for three values, which this class keeps in device memory so that the step can be captured
// once (kernels/device_graph.h) and replayed:
//   token    [1, 1] int64  the token fed in;
//   position [1]    int64  its position = the cached positions so far. TransformerLM::forward_decode
//                          writes its K, V at cache row `position` (index_copy_) and attends to rows
//                          0 .. position (causal_attention over a counted prefix);
//   the graph's last kernels choose the next token on the device (autograd sample_token: lm::Sampler's rules,
//   the argmax when greedy, else a draw with a uniform the host Sampler drew), write it into `token`, and
//   move position on by 1.
// So a step needs nothing from the host, and the decoder queues up to kLookahead replays at once, each writing
// its {id, status} (float64: status is the row's max logit, which tells NaN / +inf apart, as next_token does)
// into its row of a small ring on the device, and reads the ring once: one host synchronisation per kLookahead
// tokens instead of one per token, and the GPU never waits for the host between the replays of a batch.
// Sampling: before a batch, the host Sampler draws the batch's uniforms (Sampler::next_uniform, one per token,
// copied to the device); after each token served, the Sampler's state is the state after that token's draw,
// as if it had drawn it itself — so an unused replay costs no uniform and the next batch (or eager decoding)
// continues the same random stream. The caller says how many more tokens it may ask for (`ahead`), so a batch
// never runs past the request or the cache; a stop token can still leave up to kLookahead − 1 replays unused
// (their cache rows lie beyond cache.length(), where nothing reads them). A batch is continued only by the call
// that feeds back its last token at the next position with the Sampler untouched since; any other call starts
// a new batch there.
// The host writes token / position itself (a fill kernel, no copy) only when they are not what the graph
// left there: the first step, after a re-prefill of `sliding` (cache.reset()), a token the caller chose.
// The cache's buffers never move, so the graph stays valid across resets; it is freed with the decoder.
// Results: greedy gives the same bits as eager decoding (forward_decode = forward(token, cache):
// tests/cuda/test_cuda_graph_decode.cpp); a sampled token is the host Sampler's given the same logits and
// uniform, unless the uniform lands within rounding (~1e-15) of a boundary between two tokens (the device sums
// the probabilities in another order). Needs a backend that can capture (the CPU cannot: available() is false).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/device_graph.h"
#include "lm/sampler.h"
#include "nn/kv_cache.h"
#include "nn/transformer_lm.h"

namespace tapegrad::lm {

class GraphDecoder {
 public:
  // The model and cache must outlive the decoder. greedy: the sampler's options are greedy (step checks).
  GraphDecoder(const nn::TransformerLM& model, nn::KVCache& cache, bool greedy);
  ~GraphDecoder();
  GraphDecoder(const GraphDecoder&) = delete;
  GraphDecoder& operator=(const GraphDecoder&) = delete;

  // Whether the model's device can capture graphs (a GPU, or the emulated one; not the CPU).
  bool available() const { return available_; }
  // Replays queued per read of the device.
  static constexpr int64_t kLookahead = 8;

  // Runs `id` at position cache.length() (capturing the step on the first call, with the sampler's options),
  // advances the cache by one and returns the next token (greedy: the argmax; else drawn with the sampler's next
  // uniform). ahead ≥ 1: how many more tokens the caller may ask for, this one included (a batch runs up to
  // min(kLookahead, ahead, the free cache positions) steps per read, and serves the next calls from them while
  // each feeds back the token it got). Throws tapegrad::Error when the step cannot be captured, when the cache is
  // full, when the sampler's options are not those captured, or for a NaN / +inf logit (at the token it belongs
  // to; the sampler is then left before that token's draw).
  uint32_t step(uint32_t id, Sampler& sampler, int64_t ahead = 1);
  // Decode steps served so far (tokens returned by step), and graph launches (≥ steps, by the lookahead a stop
  // left unused).
  int64_t steps() const { return steps_; }
  int64_t replays() const { return replays_; }

 private:
  void capture(const SamplerOptions& options);
  bool continues_batch(uint32_t id, const Sampler& sampler) const;
  uint32_t serve(Sampler& sampler);  // the next token of the batch read last

  const nn::TransformerLM& model_;
  nn::KVCache& cache_;
  const bool greedy_;
  bool available_ = false;
  Tensor token_, position_, one_;   // device values the graph reads (see above)
  Tensor ring_, slot_;              // [kLookahead, 2] float64 {id, status} rows; the row the next replay writes
  Tensor uniforms_;                 // sampled: [kLookahead] float64, the draw of each replay of a batch
  std::unique_ptr<kernels::DeviceGraph> graph_;
  SamplerOptions captured_;         // the options the graph draws with
  int64_t device_token_ = -1;       // what token_ holds when no replay is in flight (-1: unknown)
  int64_t device_position_ = -1;    // what position_ holds
  // The batch read last: its {id, status} pairs, how many were served, what the next call must look like to be
  // served from it (the cache position and the token fed back), and (sampled) the Sampler's state before each
  // of its draws and after the last.
  std::vector<double> batch_;
  size_t batch_served_ = 0;
  int64_t batch_position_ = -1, batch_input_ = -1;
  std::vector<Generator::State> batch_states_;
  int64_t steps_ = 0, replays_ = 0;
};

}  // namespace tapegrad::lm
