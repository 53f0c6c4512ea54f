// block.cpp — the pre-norm residual block.
#include "nn/block.h"

#include "nn/precision.h"

namespace tapegrad::nn {

TransformerBlock::TransformerBlock(int64_t d_model, int64_t n_heads, int64_t n_kv_heads, int64_t d_ff,
                                   std::shared_ptr<RotaryEmbedding> rope, double eps, DType dtype, Generator* gen,
                                   const BlockOptions& o) {
  ln1 = register_module("ln1", std::make_shared<RMSNorm>(d_model, eps, dtype, o.norm_gain));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(d_model, n_heads, n_kv_heads, std::move(rope),
                                                                       dtype, gen, o.qk_norm, o.norm_gain, eps));
  ln2 = register_module("ln2", std::make_shared<RMSNorm>(d_model, eps, dtype, o.norm_gain));
  ffn = register_module("ffn", make_block_ffn(o.ffn, d_model, d_ff, dtype, gen));
  if (o.zero_init_projections) {
    NoGradGuard no_grad;
    attn->output_proj->weight.zero_();
    ffn->w2->weight.zero_();
  }
}

namespace {

// x = in.stream + in.branch fused with ln1, h = x + attend(ln1(x)) fused with ln2; returns {h, ffn(ln2(h))}.
// add_residual's policy: the stream stays in its own dtype (float32 under bf16 precision), a bf16 branch is
// widened in the fused add; the norms' outputs come out in the Matmul stage's dtype (nn/rmsnorm.h).
template <class Attend>
Residual run_block(const TransformerBlock& b, const Residual& in, Attend&& attend) {
  const ResidualNorm x = b.ln1->forward_add(in.stream, in.branch);  // [B, T, C]
  const ResidualNorm h = b.ln2->forward_add(x.sum, attend(x.normed));
  return {h.sum, b.ffn->forward(h.normed)};
}

}  // namespace

Tensor TransformerBlock::forward(const Tensor& x, const Tensor& positions) const {
  const Residual out = forward_unsummed({x, Tensor()}, positions);
  return add_residual(out.stream, out.branch);
}

Residual TransformerBlock::forward_unsummed(const Residual& in, const Tensor& positions) const {
  return run_block(*this, in, [&](const Tensor& normed) { return attn->forward(normed, positions); });
}

Residual TransformerBlock::forward_cached(const Residual& in, KVCache::Layer& cache, int64_t start) const {
  return run_block(*this, in, [&](const Tensor& normed) { return attn->forward_cached(normed, cache, start); });
}

Residual TransformerBlock::forward_decode(const Residual& in, KVCache::Layer& cache, const Tensor& position,
                                          const Tensor& key_count) const {
  return run_block(*this, in,
                   [&](const Tensor& normed) { return attn->forward_decode(normed, cache, position, key_count); });
}

}  // namespace tapegrad::nn
