// transformer_lm.h — TransformerLM: a decoder-only Llama-style language model (CS336 assignment 1).
//   ids [B, T] → token_embeddings → layers.{i} (TransformerBlock, pre-norm, RoPE, causal, GQA,
//   SwiGLU) → ln_final (RMSNorm) → lm_head → logits [B, T, V]
//
// Parameter names (CS336) and their Hugging Face Llama equivalents:
//   token_embeddings.weight            [V, C]     model.embed_tokens.weight
//   layers.{i}.ln1.weight              [C]        model.layers.{i}.input_layernorm.weight
//   layers.{i}.attn.q_proj.weight      [H·D, C]   model.layers.{i}.self_attn.q_proj.weight   (*)
//   layers.{i}.attn.k_proj.weight      [Hkv·D, C] model.layers.{i}.self_attn.k_proj.weight   (*)
//   layers.{i}.attn.v_proj.weight      [Hkv·D, C] model.layers.{i}.self_attn.v_proj.weight
//   layers.{i}.attn.output_proj.weight [C, H·D]   model.layers.{i}.self_attn.o_proj.weight
//   layers.{i}.ln2.weight              [C]        model.layers.{i}.post_attention_layernorm.weight
//   layers.{i}.ffn.w1.weight           [F, C]     model.layers.{i}.mlp.gate_proj.weight
//   layers.{i}.ffn.w3.weight           [F, C]     model.layers.{i}.mlp.up_proj.weight
//   layers.{i}.ffn.w2.weight           [C, F]     model.layers.{i}.mlp.down_proj.weight
//   ln_final.weight                    [C]        model.norm.weight
//   lm_head.weight                     [V, C]     lm_head.weight (absent when tie_embeddings:
//                                                 the logits then use token_embeddings.weight)
// The modern options (TransformerLMConfig below; docs/training.md) add or drop:
//   embed_norm.weight                  [C]        after the embedding (embed_norm)
//   layers.{i}.attn.q_norm.weight      [D]        QK-norm (qk_norm), and attn.k_norm.weight [D]
//   (no ffn.w3 with the ReLU² feed-forward; no norm weights at all when norm_gain is false)
// and the logits become c·tanh(z / c) with logit_softcap = c > 0.
// (*) Hugging Face applies RoPE "rotate half" (pairs (j, j + D/2)) while we rotate interleaved
// pairs (2k, 2k+1); HF checkpoints converted from Meta's have their q/k rows permuted per head
// accordingly, so importing them needs the inverse permutation (lm/hf_llama.h does both directions).
//
// A config converts to and from a string map (checkpoints store it as `config.<key>` metadata):
//   auto m = lm.config.to_config_map();   // {"vocab_size": "10000", "rope_theta": "10000", ...}
//   TransformerLMConfig c = TransformerLMConfig::from_config_map(m);   // exact round trip
#pragma once
#include <map>
#include <string>
#include <vector>

#include "nn/block.h"
#include "nn/embedding.h"
#include "nn/precision.h"

namespace tapegrad::nn {

struct TransformerLMConfig {
  int64_t vocab_size = 0;
  int64_t context_length = 0;  // the longest sequence (the RoPE table length)
  int64_t d_model = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;  // ≤ 0: n_heads (plain multi-head attention)
  int64_t d_ff = 0;        // ≤ 0: 8/3·d_model rounded up to a multiple of 64
  double rope_theta = 10000.0;
  bool tie_embeddings = false;
  double eps = 1e-5;       // RMSNorm
  DType dtype = kFloat32;
  // The modern options (each off by default: the fields above alone are the Llama architecture).
  FFNKind ffn = FFNKind::SwiGLU;       // "relu2": y = w2(relu(w1 x)²), d_ff default 4·C (nn/relu_squared.h)
  bool qk_norm = false;                // RMSNorm over each head's q and k before RoPE (nn/attention.h)
  bool norm_gain = true;               // false: every RMSNorm without its learned gain g
  bool embed_norm = false;             // an RMSNorm right after the token embedding
  bool zero_init_projections = false;  // attn.output_proj, ffn.w2 start at zero (training only: an init)
  double logit_softcap = 0;            // c > 0: logits = c·tanh(z / c) (Gemma 2, modded-nanogpt)

  // Every field as a string: integers in decimal, doubles in the shortest form that reads back to
  // the same bits, booleans "true"/"false", dtype "float32"/"float64", ffn "swiglu"/"relu2". Keys are the
  // field names; a modern option is written only when it differs from its default (a Llama config's map, and
  // so every checkpoint written before the options existed, holds the first 11 keys alone).
  std::map<std::string, std::string> to_config_map() const;
  // The inverse: every one of the first 11 fields must be present (a modern option may be absent: its
  // default), no unknown key, every value must parse completely; otherwise one tapegrad::Error lists all the
  // problems. (Implemented in transformer_lm_config.cpp.)
  static TransformerLMConfig from_config_map(const std::map<std::string, std::string>& map);
  // The modern options that differ from the Llama architecture, as train flags ("--ffn relu2", "--qk-norm",
  // …; zero_init_projections is not one: it leaves no trace in a trained model). Empty: a Llama model, which
  // llama2.c's and Hugging Face's Llama formats can hold.
  std::vector<std::string> non_llama_options() const;
  // How many weights the model has (every parameter, the norms' gains included), in double so that a damaged
  // config cannot overflow: what a file must hold before a model of this config is built from it.
  double parameter_count() const;
};

class TransformerLM : public Module {
 public:
  explicit TransformerLM(const TransformerLMConfig& config, Generator* gen = nullptr);
  // ids [B, T] int64/int32 (T ≤ context_length, ids in [0, V)) → logits [B, T, V].
  // When `hidden` is given, the residual stream after each block ([B, T, C]) is appended to it.
  Tensor forward(const Tensor& ids, std::vector<Tensor>* hidden = nullptr) const;
  Tensor operator()(const Tensor& ids) const { return forward(ids); }
  // Inference with a KV cache (nn/kv_cache.h): ids [B, T] are the positions cache.length() ..
  // cache.length()+T−1; → logits [B, T, V], and the cache has advanced by T. Runs without a tape
  // (NoGradGuard inside). An error, with the cache unchanged, when the positions do not fit.
  // last_only: logits of the last position alone, [B, 1, V] (a prompt's prefill needs no more; the
  // classifier is then run on one row instead of T).
  Tensor forward(const Tensor& ids, KVCache& cache, bool last_only = false) const;
  // One decode step with nothing read by the host, to be captured once as a CUDA graph and replayed for every
  // token (lm/graph_decoder.h): token [B, 1] int64 and position [1] int64 (the token's position, = the number
  // of cached positions) on the model's device → logits [B, 1, V]. Writes the token's K, V into cache row
  // position[0] and attends to rows 0 .. position[0]. Leaves `position` and cache.length() as they are: the
  // caller moves both on (position is not checked on the host: a value outside [0, capacity) is a device error
  // at the next check). The same bits as forward(token, cache) at cache.length() = position[0].
  Tensor forward_decode(const Tensor& token, KVCache& cache, const Tensor& position) const;

  // Inference with int8 weights (kernels/int8.h, docs/quantization.md): every Linear of every block
  // and, unless keep_embeddings_float, the embedding table (and so a tied classifier) and lm_head
  // become int8 in groups of `group` along their input dimension. The model can no longer be trained.
  void quantize_int8(int64_t group, bool keep_embeddings_float = false);
  // Whether any weight is int8.
  bool is_int8() const;
  // Where the model's tensors are (the final RMSNorm's weight: never int8, always present).
  Device device() const;
  // Every Linear of the model by parameter prefix ("layers.0.attn.q_proj", …, "lm_head").
  std::vector<std::pair<std::string, std::shared_ptr<Linear>>> named_linears() const;
  // Every int8 weight by the prefix of its parameter name ("token_embeddings", "layers.0.attn.q_proj", …).
  std::map<std::string, std::shared_ptr<const kernels::Int8Matrix>> named_int8_weights() const;

  TransformerLMConfig config;
  std::shared_ptr<Embedding> token_embeddings;
  std::shared_ptr<ModuleList> layers;  // registered as "layers": names layers.{i}.…
  std::vector<std::shared_ptr<TransformerBlock>> blocks;  // the same blocks, typed
  std::shared_ptr<RMSNorm> embed_norm;  // null unless config.embed_norm
  std::shared_ptr<RMSNorm> ln_final;
  std::shared_ptr<Linear> lm_head;     // null when tie_embeddings
  std::shared_ptr<RotaryEmbedding> rope;  // shared by every layer; not registered (no saved state)

 private:
  Tensor embed(const Tensor& ids) const;   // [B, T] → [B, T, C] (embed_norm applied)
  Tensor classify(const Tensor& x) const;  // [B, T, C] → logits [B, T, V] (soft-capped)
  WeightCast tied_head_cast_;  // the tied head's bf16 copy of W_E while a CastCacheGuard is alive
};

// The state dict of a TransformerLM whose vocabulary grows from V (the rows of token_embeddings.weight) to
// new_vocab_size (`train --sft` appends the chat template's special tokens, lm/chat_template.h): the embedding
// and an untied lm_head.weight get new_vocab_size − V rows appended, each the MEAN of the existing rows; every
// other tensor is passed through (shared). Load it into a TransformerLM of the grown config. Why the mean: a new
// row then starts as an "average" token — its embedding lies among the trained ones, and its logit h·mean(W) is
// the mean of the other logits, so the new tokens neither dominate the softmax nor start at a vanishing
// probability, and the loss of the pretrained model on ordinary text is almost unchanged (Hewitt 2021,
// "Initializing new word embeddings"); random rows at the init scale would disturb every prediction at first.
// tapegrad::Error when there is no token_embeddings.weight or new_vocab_size < V.
StateDict grow_vocabulary(const StateDict& state, int64_t new_vocab_size);

}  // namespace tapegrad::nn
