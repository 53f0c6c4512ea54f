// transformer_decoder_layer.cpp — the three residual sub-layers, post-norm or pre-norm.
#include "nn/transformer_decoder_layer.h"

namespace tapegrad::nn {

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerConfig& c, Generator* gen,
                                                 std::shared_ptr<Generator> dgen)
    : config(c) {
  self_attn = register_module("self_attn", std::make_shared<MultiHeadAttention>(c.d_model, c.n_heads, c.bias, c.dtype, gen));
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(c.d_model, c.eps, true, c.dtype));
  cross_attn = register_module("cross_attn", std::make_shared<MultiHeadAttention>(c.d_model, c.n_heads, c.bias, c.dtype, gen));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(c.d_model, c.eps, true, c.dtype));
  ffn = register_module("ffn", std::make_shared<FeedForward>(c.d_model, c.d_ff, c.activation, c.bias, c.dtype, gen));
  ln3 = register_module("ln3", std::make_shared<LayerNorm>(c.d_model, c.eps, true, c.dtype));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(c.dropout, dgen));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(c.dropout, dgen));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(c.dropout, dgen));
}

Tensor TransformerDecoderLayer::forward(const Tensor& x, const Tensor& memory, const Tensor& tgt_mask,
                                        const Tensor& memory_mask) const {
  if (config.norm_first) {
    Tensor h = ln1->forward(x);
    Tensor y = x + dropout1->forward(self_attn->forward(h, h, tgt_mask, /*causal=*/true));  // [B, T, C]
    y = y + dropout2->forward(cross_attn->forward(ln2->forward(y), memory, memory_mask));   // [B, T, C]
    return y + dropout3->forward(ffn->forward(ln3->forward(y)));
  }
  Tensor y = ln1->forward(x + dropout1->forward(self_attn->forward(x, x, tgt_mask, /*causal=*/true)));
  y = ln2->forward(y + dropout2->forward(cross_attn->forward(y, memory, memory_mask)));
  return ln3->forward(y + dropout3->forward(ffn->forward(y)));
}

}  // namespace tapegrad::nn
