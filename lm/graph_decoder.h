// graph_decoder.h — decode steps replayed as one CUDA graph each (generation on a GPU).
//
//   lm::GraphDecoder decoder(model, cache, /*greedy=*/true);    // nothing captured yet
//   if (decoder.available()) next = decoder.step(next, sampler);  // cache.length() advances by 1
//
// A decode step of a small model is a few hundred tiny kernel launches (gpt2s: ~200 per token), so eager
// decoding on a GPU is bound by the host's launch rate, not by the GPU. The step is the same work every
// token but for three values, which this class keeps in device memory so that the step can be captured
// once (kernels/device_graph.h) and replayed:
//   token    [1, 1] int64  the token fed in;
//   position [1]    int64  its position = the cached positions so far. TransformerLM::forward_decode
//                          writes its K, V at cache row `position` (index_copy_) and attends to rows
//                          0 .. position (causal_attention over a counted prefix);
//   the graph's last kernels move them on: position += 1 and, when greedy, token = argmax(logits).
// So a greedy token costs one graph launch and one 16-byte read (the id and its logit, as float64: the
// logit tells NaN / +inf apart, as next_token does); a sampled one a launch and a read of the logits row
// [V], which the host Sampler draws from (the same seed gives the same text on every device).
// The host writes token / position itself (a fill kernel, no copy) only when they are not what the graph
// left there: the first step, a sampled token, after a re-prefill of `sliding` (cache.reset()).
// The cache's buffers never move, so the graph stays valid across resets; it is freed with the decoder.
// Results: the same bits as eager decoding (forward_decode = forward(token, cache): tests/cuda/
// test_cuda_graph_decode.cpp). Needs a backend that can capture (the CPU cannot: available() is false).
#pragma once
#include <cstdint>
#include <memory>

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
  // Runs `id` at position cache.length() (capturing the step on the first call), advances the cache by one
  // and returns the next token (greedy: the argmax; else sampler.sample(logits row)). Throws tapegrad::Error
  // when the step cannot be captured, when the cache is full, or for a NaN / +inf greedy logit.
  uint32_t step(uint32_t id, Sampler& sampler);
  // Graph launches so far (each one decode step).
  int64_t replays() const { return replays_; }

 private:
  void capture();

  const nn::TransformerLM& model_;
  nn::KVCache& cache_;
  const bool greedy_;
  bool available_ = false;
  Tensor token_, position_, one_;   // device values the graph reads (see above)
  Tensor readback_;                 // written by the graph: greedy [2] float64 {id, logit}; sampled [V] logits
  std::unique_ptr<kernels::DeviceGraph> graph_;
  int64_t device_token_ = -1;       // what token_ holds when no replay is in flight (-1: unknown)
  int64_t device_position_ = -1;    // what position_ holds
  int64_t replays_ = 0;
};

}  // namespace tapegrad::lm
