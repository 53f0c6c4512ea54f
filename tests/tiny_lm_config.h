// tiny_lm_config.h — the small TransformerLM several tests build: vocabulary 64, context 16, d_model 32,
// 2 layers, 4 query heads sharing 2 key/value heads (GQA), d_ff 64; a forward and backward take milliseconds.
#pragma once
#include "nn/transformer_lm.h"

namespace tapegrad::testing {

inline nn::TransformerLMConfig tiny_gqa_lm(DType dtype = DType::Float32) {
  nn::TransformerLMConfig c;
  c.vocab_size = 64;
  c.context_length = 16;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 64;
  c.dtype = dtype;
  return c;
}

}  // namespace tapegrad::testing
