// embedding.h — Embedding: a lookup table weight [V, C]; ids [...] int → [..., C].
// Init (CS336): N(0, σ²) truncated at ±3σ, σ = init_std (1 by default; a TransformerLM whose head is tied to
// this table uses 1/√C, nn/transformer_lm.h).
// With int8 rows (quantize_int8 / set_int8_weight, as nn/linear.h) a lookup dequantizes the rows it
// returns, and `weight` is released.
#pragma once
#include <memory>

#include "kernels/int8.h"
#include "nn/module.h"

namespace tapegrad::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, DType dtype = kFloat32, Generator* gen = nullptr,
            double init_std = 1.0);
  // ids [...] (int64/int32, each in [0, V)) → [..., C]; an id out of range is a tapegrad::Error.
  Tensor forward(const Tensor& ids) const;
  Tensor operator()(const Tensor& ids) const { return forward(ids); }

  void quantize_int8(int64_t group);
  void set_int8_weight(kernels::Int8Matrix w);  // must be [V, C]

  int64_t num_embeddings, embedding_dim;
  Tensor weight;  // [V, C]; undefined once int8
  std::shared_ptr<const kernels::Int8Matrix> int8_weight;  // [V, C] in groups along C; null when float
};

}  // namespace tapegrad::nn
