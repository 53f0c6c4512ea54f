// kv_cache.cpp — the preallocated per-layer K/V buffers (see kv_cache.h).
#include "nn/kv_cache.h"

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "nn/precision.h"
#include "nn/transformer_lm.h"

namespace tapegrad::nn {

KVCache::KVCache(const TransformerLMConfig& config, int64_t batch, int64_t capacity, Device device)
    : batch_(batch), capacity_(capacity > 0 ? capacity : config.context_length) {
  TG_CHECK(batch > 0, "KVCache: batch must be positive, got {}", batch);
  TG_CHECK(capacity_ <= config.context_length, "KVCache: capacity {} is longer than the model's context_length {}",
           capacity_, config.context_length);
  const int64_t kv = config.n_kv_heads > 0 ? config.n_kv_heads : config.n_heads;
  const int64_t d = config.d_model / config.n_heads;
  // The attention's dtype under the precision active now (bf16 under a bf16 PrecisionGuard: half the bytes).
  const DType dtype = config.dtype == kFloat32 ? stage_dtype(Stage::Attention) : config.dtype;
  for (int64_t l = 0; l < config.n_layers; ++l)
    layers_.push_back({zeros({batch, kv, capacity_, d}, Options(dtype).device(device)),
                       zeros({batch, kv, capacity_, d}, Options(dtype).device(device))});
}

void KVCache::advance(int64_t t) {
  TG_CHECK(t >= 0 && length_ + t <= capacity_, "KVCache: {} more positions do not fit ({} of {} used)", t, length_,
           capacity_);
  length_ += t;
}

}  // namespace tapegrad::nn
