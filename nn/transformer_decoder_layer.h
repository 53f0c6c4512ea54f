// transformer_decoder_layer.h — one layer of the original Transformer's decoder (Vaswani et al. 2017):
// causal self-attention over the target, cross-attention (queries from the target, keys/values from
// the encoder's output `memory`), then the feed-forward network; each a residual sub-layer with
// LayerNorm and residual dropout, post-norm or pre-norm as TransformerLayerConfig::norm_first says:
//   post-norm (paper):                                 pre-norm:
//     x = ln1(x + drop1(self_attn(x, x, tgt, causal)))   x = x + drop1(self_attn(ln1 x, ln1 x, tgt, causal))
//     x = ln2(x + drop2(cross_attn(x, mem, mem_mask)))   x = x + drop2(cross_attn(ln2 x, mem, mem_mask))
//     x = ln3(x + drop3(ffn(x)))                         x = x + drop3(ffn(ln3 x))
// x [B, T, C], memory [B, S, C] (S ≠ T is fine), tgt_mask [B, T] and memory_mask [B, S] bool
// (true = real token) or undefined → [B, T, C].
// Names: self_attn.*, ln1, cross_attn.*, ln2, ffn.{w1,w2}, ln3.
#pragma once
#include "nn/transformer_encoder_layer.h"

namespace tapegrad::nn {

class TransformerDecoderLayer : public Module {
 public:
  explicit TransformerDecoderLayer(const TransformerLayerConfig& config, Generator* init_gen = nullptr,
                                   std::shared_ptr<Generator> dropout_gen = nullptr);
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                 const Tensor& memory_mask = Tensor()) const;
  Tensor operator()(const Tensor& x, const Tensor& memory, const Tensor& tgt_mask = Tensor(),
                    const Tensor& memory_mask = Tensor()) const {
    return forward(x, memory, tgt_mask, memory_mask);
  }

  TransformerLayerConfig config;
  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<LayerNorm> ln1;
  std::shared_ptr<MultiHeadAttention> cross_attn;
  std::shared_ptr<LayerNorm> ln2;
  std::shared_ptr<FeedForward> ffn;
  std::shared_ptr<LayerNorm> ln3;
  std::shared_ptr<Dropout> dropout1, dropout2, dropout3;
};

}  // namespace tapegrad::nn
