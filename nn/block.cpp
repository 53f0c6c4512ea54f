// block.cpp — the pre-norm residual block.
#include "nn/block.h"

#include "nn/precision.h"

namespace tapegrad::nn {

TransformerBlock::TransformerBlock(int64_t d_model, int64_t n_heads, int64_t n_kv_heads, int64_t d_ff,
                                   std::shared_ptr<RotaryEmbedding> rope, double eps, DType dtype, Generator* gen) {
  ln1 = register_module("ln1", std::make_shared<RMSNorm>(d_model, eps, dtype));
  attn = register_module("attn",
                         std::make_shared<CausalSelfAttention>(d_model, n_heads, n_kv_heads, std::move(rope), dtype, gen));
  ln2 = register_module("ln2", std::make_shared<RMSNorm>(d_model, eps, dtype));
  ffn = register_module("ffn", std::make_shared<SwiGLU>(d_model, d_ff, dtype, gen));
}

// h = x + attn(ln1(x)); out = h + ffn(ln2(h)). add_residual: the residual stream stays in its own dtype
// (float32 under bf16 precision, where the branches come out of bf16 matmuls; nn/precision.h).
Tensor TransformerBlock::forward(const Tensor& x, const Tensor& positions) const {
  Tensor h = add_residual(x, attn->forward(ln1->forward(x), positions));  // [B, T, C]
  return add_residual(h, ffn->forward(ln2->forward(h)));
}

Tensor TransformerBlock::forward_cached(const Tensor& x, KVCache::Layer& cache, int64_t start) const {
  Tensor h = add_residual(x, attn->forward_cached(ln1->forward(x), cache, start));
  return add_residual(h, ffn->forward(ln2->forward(h)));
}

Tensor TransformerBlock::forward_decode(const Tensor& x, KVCache::Layer& cache, const Tensor& position,
                                        const Tensor& key_count) const {
  Tensor h = add_residual(x, attn->forward_decode(ln1->forward(x), cache, position, key_count));
  return add_residual(h, ffn->forward(ln2->forward(h)));
}

}  // namespace tapegrad::nn
