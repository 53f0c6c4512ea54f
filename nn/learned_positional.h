// learned_positional.h — learned absolute positional embeddings (BERT, GPT-2): a parameter table
//   weight [max_len, C],   forward(x [B, T, C]) = x + weight[:T]   (broadcast over B; also [T, C])
// Init: N(0, 1) truncated at ±3, like Embedding (so positions start on the tokens' scale).
// T > max_len is a tapegrad::Error. Parameter name: weight.
#pragma once
#include "nn/module.h"

namespace tapegrad::nn {

class LearnedPositionalEmbedding : public Module {
 public:
  LearnedPositionalEmbedding(int64_t max_len, int64_t d_model, DType dtype = kFloat32, Generator* gen = nullptr);
  // x [..., T, C] → x + weight[:T]
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  int64_t max_len, d_model;
  Tensor weight;  // [max_len, C]
};

}  // namespace tapegrad::nn
