// embedding.h — Embedding: a lookup table weight [V, C]; ids [...] int → [..., C].
// Init (CS336): N(0, 1) truncated at ±3.
#pragma once
#include "nn/module.h"

namespace tapegrad::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, DType dtype = kFloat32, Generator* gen = nullptr);
  // ids [...] (int64/int32, each in [0, V)) → [..., C]; an id out of range is a tapegrad::Error.
  Tensor forward(const Tensor& ids) const;
  Tensor operator()(const Tensor& ids) const { return forward(ids); }

  int64_t num_embeddings, embedding_dim;
  Tensor weight;  // [V, C]
};

}  // namespace tapegrad::nn
