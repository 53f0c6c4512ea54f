// kv_cache.h — the keys and values of the positions a TransformerLM has already seen, so that
// generation runs each new token through the model once instead of re-running the whole prefix.
//
//   nn::KVCache cache(lm.config, /*batch=*/1);        // preallocated: [B, Hkv, context, D] per layer
//   Tensor logits = lm.forward(prompt_ids, cache);    // prefill: T tokens in one pass
//   logits = lm.forward(next_id, cache);              // decode: one token, attends to the cached prefix
//
// For layer l the cache holds K and V after RoPE, [B, Hkv, capacity, D], of which the first length()
// positions are filled. forward(ids [B, T], cache) writes positions length() .. length()+T−1 and then
// advances length() by T. Nothing is reallocated while generating; going past capacity is an error.
#pragma once
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad::nn {

struct TransformerLMConfig;

class KVCache {
 public:
  // capacity ≤ 0: the model's context_length. Tensors in the config's dtype (bf16 for a float32 model under a
  // bf16 nn::PrecisionGuard), on `device`.
  KVCache(const TransformerLMConfig& config, int64_t batch, int64_t capacity = 0, Device device = kCPU);

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  int64_t batch() const { return batch_; }
  void reset() { length_ = 0; }  // forget every position (the buffers stay)

  struct Layer {
    Tensor k, v;  // [B, Hkv, capacity, D]
  };
  Layer& layer(size_t i) { return layers_.at(i); }
  size_t num_layers() const { return layers_.size(); }

  // Called by TransformerLM::forward once every layer has written the T new positions.
  void advance(int64_t t);

 private:
  std::vector<Layer> layers_;
  int64_t batch_, capacity_, length_ = 0;
};

}  // namespace tapegrad::nn
