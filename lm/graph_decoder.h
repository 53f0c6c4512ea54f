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
//   the graph's last kernels move them on: position += 1 and, when greedy, token = argmax(logits).
// Greedy decoding needs nothing from the host between steps (the graph feeds its own argmax back), so the
// decoder queues up to kLookahead replays at once, each writing its {id, logit} (float64: the logit tells NaN /
// +inf apart, as next_token does) into its row of a small ring on the device, and reads the ring once: one
// host synchronisation per kLookahead tokens instead of one per token, and the GPU never waits for the host
// between the replays of a batch. The caller says how many more tokens it may ask for (`ahead`), so a batch
// never runs past the request or the cache; a stop token can still leave up to kLookahead − 1 replays unused
// (their cache rows lie beyond cache.length(), where nothing reads them). A sampled token costs a launch and
// a read of the logits row [V], which the host Sampler draws from (same seed, same text on every device).
// The host writes token / position itself (a fill kernel, no copy) only when they are not what the graph
// left there: the first step, a sampled token, after a re-prefill of `sliding` (cache.reset()).
// The cache's buffers never move, so the graph stays valid across resets; it is freed with the decoder.
// Results: the same bits as eager decoding (forward_decode = forward(token, cache): tests/cuda/
// test_cuda_graph_decode.cpp). Needs a backend that can capture (the CPU cannot: available() is false).
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
  // The model and cache must outlive the decoder. greedy: the argmax is taken inside the graph.
  GraphDecoder(const nn::TransformerLM& model, nn::KVCache& cache, bool greedy);
  ~GraphDecoder();
  GraphDecoder(const GraphDecoder&) = delete;
  GraphDecoder& operator=(const GraphDecoder&) = delete;

  // Whether the model's device can capture graphs (a GPU, or the emulated one; not the CPU).
  bool available() const { return available_; }
  // Greedy replays queued per read of the device.
  static constexpr int64_t kLookahead = 8;

  // Runs `id` at position cache.length() (capturing the step on the first call), advances the cache by one
  // and returns the next token (greedy: the argmax; else sampler.sample(logits row)). ahead ≥ 1: how many
  // more tokens the caller may ask for, this one included (greedy runs up to min(kLookahead, ahead, the free
  // cache positions) steps per read, and serves the next calls from them while each feeds back the token it
  // got). Throws tapegrad::Error when the step cannot be captured, when the cache is full, or for a NaN / +inf
  // greedy logit (at the token it belongs to).
  uint32_t step(uint32_t id, Sampler& sampler, int64_t ahead = 1);
  // Decode steps served so far (tokens returned by step), and graph launches (greedy: ≥ steps, by the
  // lookahead a stop left unused).
  int64_t steps() const { return steps_; }
  int64_t replays() const { return replays_; }

 private:
  void capture();
  uint32_t serve_greedy();  // the next token of the batch read last

  const nn::TransformerLM& model_;
  nn::KVCache& cache_;
  const bool greedy_;
  bool available_ = false;
  Tensor token_, position_, one_;   // device values the graph reads (see above)
  Tensor readback_;                 // sampled: the [V] logits the graph leaves
  Tensor ring_, slot_;              // greedy: [kLookahead, 2] float64 {id, logit} rows; the row the next replay writes
  std::unique_ptr<kernels::DeviceGraph> graph_;
  int64_t device_token_ = -1;       // what token_ holds when no replay is in flight (-1: unknown)
  int64_t device_position_ = -1;    // what position_ holds
  // The greedy batch read last: its {id, logit} pairs, how many were served, and what the next call must look
  // like to be served from it (the cache position and the token fed back).
  std::vector<double> batch_;
  size_t batch_served_ = 0;
  int64_t batch_position_ = -1, batch_input_ = -1;
  int64_t steps_ = 0, replays_ = 0;
};

}  // namespace tapegrad::lm
