// transformer_encoder_layer.h — one layer of the original Transformer's encoder (Vaswani et al. 2017):
// self-attention over the source (key-padding mask, no causal mask), then the feed-forward network,
// each a residual sub-layer with LayerNorm and dropout on the sub-layer's output ("residual dropout").
//   post-norm (norm_first = false, the paper and PyTorch's default):
//     x = ln1(x + dropout1(self_attn(x, x, mask)))
//     x = ln2(x + dropout2(ffn(x)))
//   pre-norm (norm_first = true, GPT-2 / most modern models; trains without warm-up, needs a final
//   LayerNorm after the last layer, which EncoderDecoder adds):
//     x = x + dropout1(self_attn(ln1(x), ln1(x), mask))
//     x = x + dropout2(ffn(ln2(x)))
// x [B, S, C], mask [B, S] bool (true = real token) or undefined → [B, S, C].
// Names: self_attn.{q,k,v,output}_proj, ln1, ffn.{w1,w2}, ln2 (dropouts have no parameters).
#pragma once
#include <memory>

#include "nn/dropout.h"
#include "nn/feedforward.h"
#include "nn/layernorm.h"
#include "nn/multihead_attention.h"

namespace tapegrad::nn {

// The options shared by the encoder and decoder layers.
struct TransformerLayerConfig {
  int64_t d_model = 0;
  int64_t n_heads = 0;
  int64_t d_ff = 0;
  double dropout = 0.1;                       // residual dropout p (0 = none)
  Activation activation = Activation::Relu;   // of the feed-forward network
  bool norm_first = false;                    // false: post-norm (paper); true: pre-norm
  double eps = 1e-5;                          // LayerNorm
  bool bias = true;                           // biases in attention and feed-forward Linears
  DType dtype = kFloat32;
};

class TransformerEncoderLayer : public Module {
 public:
  // init_gen: parameter init (null: the default generator); dropout_gen: the dropout masks (null:
  // the default generator), shared by this layer's dropouts.
  explicit TransformerEncoderLayer(const TransformerLayerConfig& config, Generator* init_gen = nullptr,
                                   std::shared_ptr<Generator> dropout_gen = nullptr);
  // x [B, S, C], mask [B, S] bool (true = real token) or undefined → [B, S, C]
  Tensor forward(const Tensor& x, const Tensor& mask = Tensor()) const;
  Tensor operator()(const Tensor& x, const Tensor& mask = Tensor()) const { return forward(x, mask); }

  TransformerLayerConfig config;
  std::shared_ptr<MultiHeadAttention> self_attn;
  std::shared_ptr<LayerNorm> ln1;
  std::shared_ptr<FeedForward> ffn;
  std::shared_ptr<LayerNorm> ln2;
  std::shared_ptr<Dropout> dropout1, dropout2;
};

}  // namespace tapegrad::nn
