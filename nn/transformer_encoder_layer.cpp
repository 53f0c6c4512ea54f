// transformer_encoder_layer.cpp — the two residual sub-layers, post-norm or pre-norm.
#include "nn/transformer_encoder_layer.h"

namespace tapegrad::nn {

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerConfig& c, Generator* gen,
                                                 std::shared_ptr<Generator> dgen)
    : config(c) {
  self_attn = register_module("self_attn", std::make_shared<MultiHeadAttention>(c.d_model, c.n_heads, c.bias, c.dtype, gen));
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(c.d_model, c.eps, true, c.dtype));
  ffn = register_module("ffn", std::make_shared<FeedForward>(c.d_model, c.d_ff, c.activation, c.bias, c.dtype, gen));
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(c.d_model, c.eps, true, c.dtype));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(c.dropout, dgen));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(c.dropout, dgen));
}

Tensor TransformerEncoderLayer::forward(const Tensor& x, const Tensor& mask) const {
  if (config.norm_first) {
    Tensor h = ln1->forward(x);
    Tensor y = x + dropout1->forward(self_attn->forward(h, h, mask));  // [B, S, C]
    return y + dropout2->forward(ffn->forward(ln2->forward(y)));
  }
  Tensor y = ln1->forward(x + dropout1->forward(self_attn->forward(x, x, mask)));  // [B, S, C]
  return ln2->forward(y + dropout2->forward(ffn->forward(y)));
}

}  // namespace tapegrad::nn
