// embedding.cpp — Embedding's init, id validation and lookup.
#include "nn/embedding.h"

#include <cmath>

#include "autograd/int8_ops.h"

namespace tapegrad::nn {

Embedding::Embedding(int64_t v, int64_t c, DType dtype, Generator* gen, double init_std)
    : num_embeddings(v), embedding_dim(c) {
  TG_CHECK(v > 0 && c > 0, "Embedding: sizes must be positive, got vocab {} dim {}", v, c);
  TG_CHECK(std::isfinite(init_std) && init_std > 0, "Embedding: init_std must be positive, but is {}", init_std);
  const double s = init_std;
  weight = register_parameter("weight", SkipParameterInitGuard::active()
                                            ? empty({v, c}, dtype)
                                            : trunc_normal({v, c}, 0.0, s, -3.0 * s, 3.0 * s, dtype, gen));
}

Tensor Embedding::forward(const Tensor& ids) const {
  TG_CHECK(ids.defined() && (ids.dtype() == kInt64 || ids.dtype() == kInt32),
           "Embedding: token ids must be int64 or int32");
  // On the CPU a bad id is an error now, naming the module; on a GPU the index_select kernel reports
  // it at the next synchronisation (reading the ids here would synchronise every forward).
  if (ids.device().type == DeviceType::CPU && !int8_weight)
    for (int64_t id : ids.to_vector<int64_t>())
      TG_CHECK(id >= 0 && id < num_embeddings, "Embedding: token id {} is out of range [0, {}) (ids {})", id,
               num_embeddings, ids.shape());
  if (int8_weight) return int8_embedding(ids, *int8_weight);  // checks the ids itself
  return embedding(weight, ids);  // [...] → [..., C]
}

void Embedding::quantize_int8(int64_t group) {
  TG_CHECK(weight.defined(), "Embedding::quantize_int8: the weight is already int8");
  const Tensor w = weight.detach().to(kCPU).to(kFloat32).contiguous();
  set_int8_weight(kernels::quantize_int8(w.data<float>(), num_embeddings, embedding_dim, group));
}

void Embedding::set_int8_weight(kernels::Int8Matrix w) {
  kernels::check_int8_matrix(w, "Embedding");
  TG_CHECK(w.rows == num_embeddings && w.cols == embedding_dim,
           "Embedding: an int8 table [{}, {}] for an Embedding [{}, {}]", w.rows, w.cols, num_embeddings, embedding_dim);
  int8_weight = std::make_shared<const kernels::Int8Matrix>(std::move(w));
  release_parameter("weight");
  weight = Tensor();
}

}  // namespace tapegrad::nn
