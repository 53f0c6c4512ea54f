// transformer_lm.cpp — config validation, construction and the forward pass of TransformerLM.
#include "nn/transformer_lm.h"

#include <cmath>

#include "autograd/int8_ops.h"
#include "autograd/ops_from_table.h"
#include "nn/precision.h"

namespace tapegrad::nn {

namespace {
const TransformerLMConfig& validated(const TransformerLMConfig& c) {
  TG_CHECK(c.vocab_size > 0 && c.context_length > 0 && c.d_model > 0 && c.n_layers >= 0 && c.n_heads > 0,
           "TransformerLM: vocab_size {}, context_length {}, d_model {}, n_heads {} must be positive (n_layers {} ≥ 0)",
           c.vocab_size, c.context_length, c.d_model, c.n_heads, c.n_layers);
  TG_CHECK(c.d_model % c.n_heads == 0, "TransformerLM: d_model {} is not divisible by n_heads {}", c.d_model,
           c.n_heads);
  const int64_t kv = c.n_kv_heads > 0 ? c.n_kv_heads : c.n_heads;
  TG_CHECK(c.n_heads % kv == 0, "TransformerLM: n_heads {} is not divisible by n_kv_heads {}", c.n_heads, kv);
  TG_CHECK((c.d_model / c.n_heads) % 2 == 0, "TransformerLM: the head dim d_model / n_heads = {} must be even (RoPE)",
           c.d_model / c.n_heads);
  TG_CHECK(c.logit_softcap >= 0 && std::isfinite(c.logit_softcap),
           "TransformerLM: logit_softcap {} must be a finite number ≥ 0 (0: no cap)", c.logit_softcap);
  return c;
}
}  // namespace

TransformerLM::TransformerLM(const TransformerLMConfig& c, Generator* gen) : config(validated(c)) {
  if (config.n_kv_heads <= 0) config.n_kv_heads = config.n_heads;
  if (config.d_ff <= 0) config.d_ff = default_d_ff(config.ffn, config.d_model);
  const DType dt = config.dtype;
  rope = std::make_shared<RotaryEmbedding>(config.rope_theta, config.d_model / config.n_heads, config.context_length,
                                           dt);
  // Tied, the table is also the classifier: logit_v = x̂·E_v with x̂ = the final norm's output (RMS 1), so
  // E_v ~ N(0, 1) would give logits of standard deviation √C (and the input token's own logit ≈ C): a first
  // loss of ~70 where ln V ≈ 5.5. σ = 1/√C makes the logits ~N(0, 1) at the start.
  const double embedding_std = config.tie_embeddings ? 1.0 / std::sqrt(double(config.d_model)) : 1.0;
  token_embeddings = register_module(
      "token_embeddings", std::make_shared<Embedding>(config.vocab_size, config.d_model, dt, gen, embedding_std));
  if (config.embed_norm)
    embed_norm = register_module("embed_norm", std::make_shared<RMSNorm>(config.d_model, config.eps, dt, config.norm_gain));
  layers = register_module("layers", std::make_shared<ModuleList>());
  const BlockOptions options{config.ffn, config.qk_norm, config.norm_gain, config.zero_init_projections};
  for (int64_t i = 0; i < config.n_layers; ++i)
    blocks.push_back(layers->push_back(std::make_shared<TransformerBlock>(
        config.d_model, config.n_heads, config.n_kv_heads, config.d_ff, rope, config.eps, dt, gen, options)));
  ln_final = register_module("ln_final", std::make_shared<RMSNorm>(config.d_model, config.eps, dt, config.norm_gain));
  if (!config.tie_embeddings)
    lm_head = register_module("lm_head", std::make_shared<Linear>(config.d_model, config.vocab_size, false, dt, gen));
  // Shared by every layer. Its buffers are not persistent (no saved state); registered so that
  // to(device) moves its tables and positions with the parameters.
  register_module("rope", rope);
}

Tensor TransformerLM::forward(const Tensor& ids, std::vector<Tensor>* hidden) const {
  TG_CHECK(ids.defined() && ids.dim() == 2, "TransformerLM: token ids must be [B, T]");
  const int64_t T = ids.size(1);
  TG_CHECK(T >= 1 && T <= config.context_length, "TransformerLM: sequence length {} is outside [1, context_length = {}]",
           T, config.context_length);
  // The residual stream goes from block to block unsummed: each block's last add runs fused with the next
  // norm (nn/block.h: Residual).
  Residual x{embed(ids), Tensor()};                     // [B, T, C]
  const Tensor positions = rope->positions(0, T);       // on the model's device
  for (const auto& block : blocks) {
    x = block->forward_unsummed(x, positions);  // [B, T, C] + [B, T, C]
    if (hidden) hidden->push_back(add_residual(x.stream, x.branch));  // an extra add, only when asked for
  }
  return classify(ln_final->forward_add(x.stream, x.branch).normed);
}

Tensor TransformerLM::embed(const Tensor& ids) const {
  const Tensor x = token_embeddings->forward(ids);  // [B, T, C]
  return embed_norm ? embed_norm->forward(x) : x;
}

Tensor TransformerLM::classify(const Tensor& x) const {
  Tensor z;
  if (lm_head) z = lm_head->forward(x);  // [B, T, C] @ [C, V] → [B, T, V]
  else if (token_embeddings->int8_weight) z = int8_linear(x, *token_embeddings->int8_weight);  // tied: W_E [V, C]
  else z = matmul(autocast(x, Stage::Matmul), tied_head_cast_(token_embeddings->weight, Stage::Matmul).t());
  if (config.logit_softcap <= 0) return z;
  // Soft cap: c·tanh(z / c) ≈ z for |z| ≪ c and never beyond ±c; d/dz = 1 − tanh²(z / c).
  const double c = config.logit_softcap;
  return tanh(z * (1.0 / c)) * c;
}

std::vector<std::pair<std::string, std::shared_ptr<Linear>>> TransformerLM::named_linears() const {
  std::vector<std::pair<std::string, std::shared_ptr<Linear>>> out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string p = fmt::format("layers.{}.", i);
    const auto& b = *blocks[i];
    out.emplace_back(p + "attn.q_proj", b.attn->q_proj);
    out.emplace_back(p + "attn.k_proj", b.attn->k_proj);
    out.emplace_back(p + "attn.v_proj", b.attn->v_proj);
    out.emplace_back(p + "attn.output_proj", b.attn->output_proj);
    out.emplace_back(p + "ffn.w1", b.ffn->w1);
    out.emplace_back(p + "ffn.w2", b.ffn->w2);
    if (b.ffn->w3) out.emplace_back(p + "ffn.w3", b.ffn->w3);  // SwiGLU's up projection (none in ReLU²)
  }
  if (lm_head) out.emplace_back("lm_head", lm_head);
  return out;
}

void TransformerLM::quantize_int8(int64_t group, bool keep_embeddings_float) {
  TG_CHECK(!is_int8(), "TransformerLM::quantize_int8: the model is already int8");
  for (const auto& [name, linear] : named_linears())
    if (!(keep_embeddings_float && name == "lm_head")) linear->quantize_int8(group);
  if (!keep_embeddings_float) token_embeddings->quantize_int8(group);
}

Device TransformerLM::device() const { return ln_final->weight.device(); }

std::map<std::string, std::shared_ptr<const kernels::Int8Matrix>> TransformerLM::named_int8_weights() const {
  std::map<std::string, std::shared_ptr<const kernels::Int8Matrix>> out;
  if (token_embeddings->int8_weight) out["token_embeddings"] = token_embeddings->int8_weight;
  for (const auto& [name, linear] : named_linears())
    if (linear->int8_weight) out[name] = linear->int8_weight;
  return out;
}

bool TransformerLM::is_int8() const { return !named_int8_weights().empty(); }

Tensor TransformerLM::forward(const Tensor& ids, KVCache& cache, bool last_only) const {
  TG_CHECK(ids.defined() && ids.dim() == 2, "TransformerLM: token ids must be [B, T]");
  const int64_t T = ids.size(1), start = cache.length();
  TG_CHECK(T >= 1, "TransformerLM: no token ids to run");
  TG_CHECK(start + T <= cache.capacity(),
           "TransformerLM: positions {}..{} are past the KV cache's capacity {} (the context length)", start,
           start + T - 1, cache.capacity());
  TG_CHECK(ids.size(0) == cache.batch() && cache.num_layers() == blocks.size(),
           "TransformerLM: the KV cache holds batch {} and {} layers, the ids batch {} and the model {} layers",
           cache.batch(), cache.num_layers(), ids.size(0), blocks.size());
  NoGradGuard no_grad;
  Residual x{embed(ids), Tensor()};  // [B, T, C]
  for (size_t l = 0; l < blocks.size(); ++l) x = blocks[l]->forward_cached(x, cache.layer(l), start);
  cache.advance(T);
  if (last_only && T > 1) x = {x.stream.narrow(1, T - 1, 1), x.branch.narrow(1, T - 1, 1)};  // [B, 1, C]
  return classify(ln_final->forward_add(x.stream, x.branch).normed);
}

Tensor TransformerLM::forward_decode(const Tensor& token, KVCache& cache, const Tensor& position) const {
  TG_CHECK(token.defined() && token.dim() == 2 && token.size(1) == 1 && token.size(0) == cache.batch(),
           "TransformerLM: a decode step's token must be [{}, 1], got {}", cache.batch(),
           token.defined() ? token.shape() : Shape{});
  TG_CHECK(position.defined() && position.dtype() == kInt64 && position.numel() == 1,
           "TransformerLM: a decode step's position must be one int64, got {}",
           position.defined() ? position.shape() : Shape{});
  TG_CHECK(cache.num_layers() == blocks.size(), "TransformerLM: the KV cache holds {} layers, the model {}",
           cache.num_layers(), blocks.size());
  NoGradGuard no_grad;
  const Tensor pos = position.reshape({1});
  // The token's own row included; int64 on the device (a binary add: add_scalar is for floating tensors).
  const Tensor key_count = pos + ones({1}, Options(kInt64).device(pos.device()));
  Residual x{embed(token), Tensor()};  // [B, 1, C]
  for (size_t l = 0; l < blocks.size(); ++l) x = blocks[l]->forward_decode(x, cache.layer(l), pos, key_count);
  return classify(ln_final->forward_add(x.stream, x.branch).normed);
}

StateDict grow_vocabulary(const StateDict& state, int64_t new_vocab_size) {
  const auto emb = state.find("token_embeddings.weight");
  TG_CHECK(emb != state.end() && emb->second.defined() && emb->second.dim() == 2,
           "grow_vocabulary: no token_embeddings.weight [V, C] in the state");
  const int64_t v = emb->second.size(0);
  TG_CHECK(new_vocab_size >= v, "grow_vocabulary: the vocabulary can only grow ({} → {})", v, new_vocab_size);
  StateDict out = state;
  if (new_vocab_size == v) return out;
  NoGradGuard no_grad;
  auto grow = [&](const std::string& name) {
    const auto it = state.find(name);
    if (it == state.end()) return;
    const Tensor w = it->second.detach();  // [V, C]
    TG_CHECK(w.dim() == 2 && w.size(0) == v, "grow_vocabulary: {} is {}, not [{}, C]", name, w.shape(), v);
    const Tensor mean_row = w.to(kFloat64).mean({0}, true).to(w.dtype());  // [1, C]
    out[name] = cat({w, mean_row.expand({new_vocab_size - v, w.size(1)})}, 0).contiguous();
  };
  grow("token_embeddings.weight");
  grow("lm_head.weight");
  return out;
}

}  // namespace tapegrad::nn
