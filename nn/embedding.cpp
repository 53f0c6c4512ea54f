// embedding.cpp — Embedding's init, id validation and lookup.
#include "nn/embedding.h"

namespace tapegrad::nn {

Embedding::Embedding(int64_t v, int64_t c, DType dtype, Generator* gen) : num_embeddings(v), embedding_dim(c) {
  TG_CHECK(v > 0 && c > 0, "Embedding: sizes must be positive, got vocab {} dim {}", v, c);
  weight = register_parameter("weight", trunc_normal({v, c}, 0.0, 1.0, -3.0, 3.0, dtype, gen));
}

Tensor Embedding::forward(const Tensor& ids) const {
  TG_CHECK(ids.defined() && (ids.dtype() == kInt64 || ids.dtype() == kInt32),
           "Embedding: token ids must be int64 or int32");
  // On the CPU a bad id is an error now, naming the module; on a GPU the index_select kernel reports
  // it at the next synchronisation (reading the ids here would synchronise every forward).
  if (ids.device().type == DeviceType::CPU)
    for (int64_t id : ids.to_vector<int64_t>())
      TG_CHECK(id >= 0 && id < num_embeddings, "Embedding: token id {} is out of range [0, {}) (ids {})", id,
               num_embeddings, ids.shape());
  return embedding(weight, ids);  // [...] → [..., C]
}

}  // namespace tapegrad::nn
