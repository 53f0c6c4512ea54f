// block.h — TransformerBlock, pre-norm: x = x + attn(ln1(x)); x = x + ffn(ln2(x)), each residual add fused
// with the norm that reads its sum.
// Names: ln1, attn, ln2, ffn (CS336).
// BlockOptions pick the modern variants (docs/training.md, "The modern architecture"): a ReLU² feed-forward,
// QK-norm, norms without a gain, and the two output projections (attn.output_proj, ffn.w2) starting at zero —
// each block then starts as the identity, and the update of those matrices is what first moves the stream.
#pragma once
#include "nn/attention.h"
#include "nn/rmsnorm.h"
#include "nn/relu_squared.h"
#include "nn/swiglu.h"

namespace tapegrad::nn {

// The residual stream with its last add still to do: stream + branch (branch undefined: nothing pending).
// Blocks hand it on unsummed so that each add runs fused with the norm that reads its sum (add_rms_norm).
struct Residual {
  Tensor stream, branch;
};

struct BlockOptions {
  FFNKind ffn = FFNKind::SwiGLU;
  bool qk_norm = false;
  bool norm_gain = true;               // ln1, ln2 (and q_norm, k_norm) have a learned gain
  bool zero_init_projections = false;  // attn.output_proj and ffn.w2 start at zero
};

class TransformerBlock : public Module {
 public:
  TransformerBlock(int64_t d_model, int64_t n_heads, int64_t n_kv_heads, int64_t d_ff,
                   std::shared_ptr<RotaryEmbedding> rope, double eps = 1e-5, DType dtype = kFloat32,
                   Generator* gen = nullptr, const BlockOptions& options = {});
  // x [B, T, C]; positions int [T] (default 0..T−1) → [B, T, C]
  Tensor forward(const Tensor& x, const Tensor& positions = Tensor()) const;
  Tensor operator()(const Tensor& x, const Tensor& positions = Tensor()) const { return forward(x, positions); }
  // The same block on an unsummed stream: x = in.stream + in.branch, h = x + attn(ln1(x)), returns
  // {h, ffn(ln2(h))} — the caller's next norm (the next block's ln1, the model's final norm) does the last add.
  // Each add runs fused with the norm after it: forward(x) = the sum of forward_unsummed({x, {}})'s two parts.
  Residual forward_unsummed(const Residual& in, const Tensor& positions = Tensor()) const;
  // Inference with this layer's KV cache: positions start .. start+T−1 (see CausalSelfAttention::forward_cached).
  Residual forward_cached(const Residual& in, KVCache::Layer& cache, int64_t start) const;
  // One token at a device-held position (see CausalSelfAttention::forward_decode).
  Residual forward_decode(const Residual& in, KVCache::Layer& cache, const Tensor& position,
                          const Tensor& key_count) const;

  std::shared_ptr<RMSNorm> ln1;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<RMSNorm> ln2;
  std::shared_ptr<BlockFFN> ffn;  // SwiGLU or ReLU²
};

}  // namespace tapegrad::nn
