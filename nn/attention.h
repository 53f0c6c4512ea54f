// attention.h — scaled dot-product attention (functional) and CausalSelfAttention (module).
//
// scaled_dot_product_attention(Q [..., Tq, D], K [..., Tk, D], V [..., Tk, Dv], mask [..., Tq, Tk] bool)
//   = softmax(Q Kᵀ / √D, masked to −∞ where mask is false) V  → [..., Tq, Dv]
// Leading dims broadcast (matmul rules); mask true = attend. A query row with no key to attend
// to gives NaN, as in PyTorch.
//
// CausalSelfAttention: x [B, T, C] → q/k/v projections → heads (H query heads, Hkv kv heads,
// D = C / H) → RoPE on q and k (when given a RotaryEmbedding) → causal SDPA → output_proj.
// Grouped-query attention: query head h reads kv head h / (H / Hkv); done without copying K/V
// by viewing q as [B, Hkv, G, T, D] against k, v [B, Hkv, 1, T, D].
// QK-norm (qk_norm = true; OLMo 2, Qwen3, modded-nanogpt): each head's query and key vector RMS-normalized over
// D (q_norm, k_norm: RMSNorm [D], with a gain unless norm_gain is false) after the projection and before RoPE,
// so the logits q·k/√D stay bounded however the projections grow (a larger learning rate stays stable).
// Parameter names: q_proj, k_proj, v_proj, output_proj (CS336), q_norm, k_norm; Hugging Face: q/k/v/o_proj,
// q_norm/k_norm (Qwen3).
// forward runs the fused ops (rope, causal_attention: no [T, T] matrix stored, heads split
// and merged as views); forward_reference is the composition above, its test oracle.
#pragma once
#include "nn/kv_cache.h"
#include "nn/linear.h"
#include "nn/rmsnorm.h"
#include "nn/rope.h"

namespace tapegrad::nn {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask = Tensor());

// [T, T] bool, true where key position ≤ query position.
Tensor causal_mask(int64_t t, Device device = Device::cpu());

class CausalSelfAttention : public Module {
 public:
  // n_kv_heads ≤ 0 means n_heads. rope may be null (no positional rotation); it is shared, not
  // registered (its tables are non-persistent buffers), so several layers can use one table.
  CausalSelfAttention(int64_t d_model, int64_t n_heads, int64_t n_kv_heads = 0,
                      std::shared_ptr<RotaryEmbedding> rope = nullptr, DType dtype = kFloat32,
                      Generator* gen = nullptr, bool qk_norm = false, bool norm_gain = true, double eps = 1e-5);
  // x [B, T, C]; positions int [T] (default 0..T−1) → [B, T, C]
  Tensor forward(const Tensor& x, const Tensor& positions = Tensor()) const;
  Tensor operator()(const Tensor& x, const Tensor& positions = Tensor()) const { return forward(x, positions); }
  // The same computed by composition (RoPE from views and elementwise ops, SDPA with a bool mask).
  Tensor forward_reference(const Tensor& x, const Tensor& positions = Tensor()) const;
  // Inference with a KV cache (no tape: call it under NoGradGuard): x [B, T, C] holds positions
  // start .. start+T−1; their K, V (after RoPE) are written into cache rows [start, start+T), and
  // query t attends to the cached keys 0 .. start+t. → [B, T, C]. The caller advances the cache.
  Tensor forward_cached(const Tensor& x, KVCache::Layer& cache, int64_t start) const;
  // The same for one token whose position is a device value, for a decode step captured once and replayed
  // (lm/graph_decoder.h): x [B, 1, C] at position[0] (int64 [1] on x's device); its K, V go into cache row
  // position[0] (index_copy_) and the query attends to the first key_count[0] = position[0] + 1 rows
  // (causal_attention over a counted prefix). Nothing is read back to the host. The same bits as
  // forward_cached(x, cache, position).
  Tensor forward_decode(const Tensor& x, KVCache::Layer& cache, const Tensor& position,
                        const Tensor& key_count) const;

  int64_t d_model, n_heads, n_kv_heads, head_dim;
  std::shared_ptr<RotaryEmbedding> rope;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, output_proj;  // [H·D, C], [Hkv·D, C] ×2, [C, H·D]
  std::shared_ptr<RMSNorm> q_norm, k_norm;                        // [D] each; null without QK-norm

 private:
  // forward (fused = true) and forward_reference (fused = false): the same projections, either path.
  Tensor attend(const Tensor& x, const Tensor& positions, bool fused) const;
  // Q [B, H, T, D] and K, V [B, Hkv, T, D] of x [B, T, C] at `positions` [T], RoPE applied (fused), Q in
  // `dtype` (the KV cache's), for the cached forwards.
  struct QKV {
    Tensor q, k, v;
  };
  QKV project_for_cache(const Tensor& x, const Tensor& positions, DType dtype) const;
  // [B, T, n·D] projected heads → [B, n, T, D] (a view), RMS-normalized per head first when `norm` is given.
  Tensor split_heads(const Tensor& projected, int64_t n, const RMSNorm* norm, bool fused) const;
  StackedWeightCast qkv_cast_;  // [Wq; Wk; Wv] in bf16 while generating under bf16 precision (one matmul)
};

}  // namespace tapegrad::nn
