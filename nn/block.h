// block.h — TransformerBlock, pre-norm: x = x + attn(ln1(x)); x = x + ffn(ln2(x)).
// Names: ln1, attn, ln2, ffn (CS336).
#pragma once
#include "nn/attention.h"
#include "nn/rmsnorm.h"
#include "nn/swiglu.h"

namespace tapegrad::nn {

class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t d_model, int64_t n_heads, int64_t n_kv_heads, int64_t d_ff,
                   std::shared_ptr<RotaryEmbedding> rope, double eps = 1e-5, DType dtype = kFloat32,
                   Generator* gen = nullptr);
  // x [B, T, C]; positions int [T] (default 0..T−1) → [B, T, C]
  Tensor forward(const Tensor& x, const Tensor& positions = Tensor()) const;
  Tensor operator()(const Tensor& x, const Tensor& positions = Tensor()) const { return forward(x, positions); }
  // Inference with this layer's KV cache: x [B, T, C] at positions start .. start+T−1 (see
  // CausalSelfAttention::forward_cached).
  Tensor forward_cached(const Tensor& x, KVCache::Layer& cache, int64_t start) const;
  // One token at a device-held position (see CausalSelfAttention::forward_decode).
  Tensor forward_decode(const Tensor& x, KVCache::Layer& cache, const Tensor& position,
                        const Tensor& key_count) const;

  std::shared_ptr<RMSNorm> ln1;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<RMSNorm> ln2;
  std::shared_ptr<SwiGLU> ffn;
};

}  // namespace tapegrad::nn
