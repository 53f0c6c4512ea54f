// multihead_attention.h — MultiHeadAttention, the original Transformer's attention (Vaswani et al.
// 2017, §3.2.2), for self-attention and cross-attention, with a key-padding mask and an optional
// causal mask:
//   Q = query Wqᵀ + bq       [B, Tq, C] → [B, H, Tq, D]      (D = C / H)
//   K = key_value Wkᵀ + bk   [B, Tk, C] → [B, H, Tk, D]
//   V = key_value Wvᵀ + bv   [B, Tk, C] → [B, H, Tk, D]
//   heads = softmax(Q Kᵀ / √D, −∞ where masked) V         [B, H, Tq, D]
//   y = concat(heads) Woᵀ + bo                              [B, Tq, C]
// Self-attention: pass the same tensor as query and key_value; cross-attention: queries from one
// sequence, keys/values from another (Tq ≠ Tk is fine; the batch sizes must match).
//
// key_padding_mask [B, Tk] bool: TRUE = A REAL TOKEN (attend to this key), false = padding (ignore).
// That is the convention of scaled_dot_product_attention (true = attend), and the OPPOSITE of
// PyTorch's nn.MultiheadAttention key_padding_mask, where true means "ignore". From a PyTorch-style
// mask m, pass eq(m, 0.0) (logical not); from token ids, pass key_padding_mask(ids, pad_id).
// causal = true also hides key j > query i (needs Tq == Tk). Both masks combine (AND).
//
// A query row whose keys are ALL hidden (e.g. a batch entry that is entirely padding) has nothing
// to attend to; softmax over all −∞ would give NaN. We define its attention result as ZEROS: the
// row attends nowhere, its heads are 0, so y for that row is the output bias bo (0 without bias),
// and no gradient flows from that row into Q, K, V. Never NaN. (PyTorch gives NaN there.)
// Queries at padded positions are computed like any other (finite, meaningless); a loss should
// ignore them (cross_entropy's ignore_index).
//
// Parameter names: q_proj, k_proj, v_proj, output_proj (.weight [C, C], .bias [C]), as
// CausalSelfAttention; PyTorch's nn.MultiheadAttention packs q/k/v into in_proj_weight [3C, C] and
// calls the output out_proj. Init as Linear (truncated normal), biases zero.
#pragma once
#include "nn/attention.h"

namespace tapegrad::nn {

// ids [B, T] int → [B, T] bool, true where ids ≠ pad_id (a real token).
Tensor key_padding_mask(const Tensor& ids, int64_t pad_id);

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_model, int64_t n_heads, bool bias = true, DType dtype = kFloat32,
                     Generator* gen = nullptr);
  // query [B, Tq, C], key_value [B, Tk, C], key_padding_mask [B, Tk] bool (true = real token) or
  // undefined (every key visible), causal (Tq == Tk) → [B, Tq, C]
  Tensor forward(const Tensor& query, const Tensor& key_value, const Tensor& key_padding_mask = Tensor(),
                 bool causal = false) const;
  Tensor operator()(const Tensor& query, const Tensor& key_value, const Tensor& key_padding_mask = Tensor(),
                    bool causal = false) const {
    return forward(query, key_value, key_padding_mask, causal);
  }

  int64_t d_model, n_heads, head_dim;
  std::shared_ptr<Linear> q_proj, k_proj, v_proj, output_proj;  // each [C, C] (+ [C])
};

}  // namespace tapegrad::nn
