// encoder_decoder.h — EncoderDecoder: the original Transformer assembled from the classic modules
// (Vaswani et al. 2017, Fig. 1), for sequence-to-sequence tasks:
//   src [B, S] → src_embeddings + positions → encoder_layers.{i} (self-attention, padding mask)
//              → encoder_norm (pre-norm only) → memory [B, S, C]
//   tgt [B, T] → tgt_embeddings + positions → decoder_layers.{i} (causal self-attention, then
//              cross-attention into memory) → decoder_norm (pre-norm only) → lm_head → logits [B, T, V]
// Padding: when config.pad_id ≥ 0, ids equal to pad_id are padding; the key-padding masks (true =
// real token) are derived from the ids, so padded source tokens are invisible to the encoder and to
// cross-attention, and padded target tokens to the decoder. Train with cross_entropy(logits, targets,
// /*ignore_index=*/pad_id) so padded positions add nothing to the loss. Right-padding is assumed for
// the target (with a causal mask, a real target token never needs a later one).
// Positions: one SinusoidalPositionalEncoding shared by both sides (non-persistent buffer), or a
// LearnedPositionalEmbedding for each side (src_positions, tgt_positions). Embeddings are not scaled
// by √C (tapegrad's Embedding starts at N(0, 1), the table's scale). No weight tying.
// Parameter names: src_embeddings.weight, tgt_embeddings.weight, [src_positions.weight,
// tgt_positions.weight], encoder_layers.{i}.…, decoder_layers.{i}.… (see the layer headers),
// [encoder_norm.*, decoder_norm.*], lm_head.weight [V, C] (+ lm_head.bias).
#pragma once
#include <functional>
#include <span>
#include <vector>

#include "nn/embedding.h"
#include "nn/learned_positional.h"
#include "nn/sinusoidal_positional.h"
#include "nn/transformer_decoder_layer.h"

namespace tapegrad::nn {

enum class PositionalKind { Sinusoidal, Learned };

// How sample_decode picks each next token from the logits z [V] of one row:
//   temperature 0: the arg-max (greedy; the lowest id among equal logits), no random number used;
//   otherwise p_i ∝ exp((z_i − max z)/temperature) over the kept tokens, where top_k > 0 keeps only
//   the k highest logits (equal logits: the lower id first; exactly min(k, V) kept) and 0 keeps all.
// Low temperatures sharpen the distribution towards greedy, high ones flatten it towards uniform.
struct SamplingOptions {
  double temperature = 1.0;  // finite, ≥ 0
  int64_t top_k = 0;         // ≥ 0; 0: every token

  // Throws tapegrad::Error naming the option, e.g. "sampling: temperature must be a finite number >= 0
  // (0: greedy), but is -1" or "sampling: top_k must be >= 0 (0: every token), but is -2".
  void validate() const;
};

// One draw from logits [V] (finite or −inf; NaN, +inf or all −inf is an error) with `options`.
// Uses exactly one gen.uniform() unless temperature is 0 or top_k is 1 (both greedy): u ∈ [0, 1)
// picks the first kept token, in id order, whose cumulative probability exceeds u. The same logits
// and generator state give the same id on every machine.
int64_t sample_token(std::span<const double> logits, const SamplingOptions& options, Generator& gen);

struct EncoderDecoderConfig {
  int64_t src_vocab_size = 0;
  int64_t tgt_vocab_size = 0;
  int64_t max_len = 0;  // the longest source and the longest target sequence
  int64_t d_model = 0;
  int64_t n_heads = 0;
  int64_t d_ff = 0;
  int64_t n_encoder_layers = 1;
  int64_t n_decoder_layers = 1;
  double dropout = 0.1;
  Activation activation = Activation::Relu;
  bool norm_first = false;  // false: post-norm (paper); true: pre-norm (+ final encoder/decoder norms)
  PositionalKind positional = PositionalKind::Sinusoidal;
  int64_t pad_id = -1;      // ≥ 0: the padding id (masks derived from it); < 0: no padding
  double eps = 1e-5;
  bool bias = true;
  DType dtype = kFloat32;

  TransformerLayerConfig layer_config() const;
};

class EncoderDecoder : public Module {
 public:
  // init_gen: parameter init; dropout_gen: every dropout mask (null: the default generator).
  explicit EncoderDecoder(const EncoderDecoderConfig& config, Generator* init_gen = nullptr,
                          std::shared_ptr<Generator> dropout_gen = nullptr);

  // ids [B, L] → [B, L] bool, true = real token; undefined when config.pad_id < 0.
  Tensor padding_mask(const Tensor& ids) const;
  // src [B, S] → memory [B, S, C]
  Tensor encode(const Tensor& src) const;
  // tgt [B, T] (the decoder's input, starting with BOS), memory [B, S, C], memory_mask [B, S] or
  // undefined → logits [B, T, V]
  Tensor decode(const Tensor& tgt, const Tensor& memory, const Tensor& memory_mask = Tensor()) const;
  // src [B, S], tgt [B, T] → logits [B, T, V]
  Tensor forward(const Tensor& src, const Tensor& tgt) const;
  Tensor operator()(const Tensor& src, const Tensor& tgt) const { return forward(src, tgt); }

  // Greedy decoding without recording: starts every row with bos_id, appends the arg-max token
  // until it is eos_id or max_new_tokens tokens were produced (and stops when every row has ended).
  // Returns int64 [B, n ≤ max_new_tokens]: the produced tokens after BOS, each row's EOS included,
  // positions after a row's EOS filled with pad_id (eos_id without padding). The decoder is re-run
  // on the whole prefix at each step (no key/value cache): O(n²), fine for short outputs.
  // Call eval() first unless dropout should stay on.
  Tensor greedy_decode(const Tensor& src, int64_t bos_id, int64_t eos_id, int64_t max_new_tokens) const;
  // The same loop, but each row's next token is drawn by sample_token(logits of its last position,
  // options, gen), rows in order: temperature 0 (or top_k 1) gives greedy_decode's tokens. Same seed,
  // same tokens. Throws tapegrad::Error for invalid options or arguments (before decoding anything).
  Tensor sample_decode(const Tensor& src, int64_t bos_id, int64_t eos_id, int64_t max_new_tokens,
                       const SamplingOptions& options, Generator& gen) const;

  EncoderDecoderConfig config;
  std::shared_ptr<Embedding> src_embeddings, tgt_embeddings;
  std::shared_ptr<SinusoidalPositionalEncoding> sinusoidal;             // Sinusoidal: shared, "positions"
  std::shared_ptr<LearnedPositionalEmbedding> src_positions, tgt_positions;  // Learned
  std::shared_ptr<ModuleList> encoder_layers, decoder_layers;
  std::vector<std::shared_ptr<TransformerEncoderLayer>> encoder;  // the same layers, typed
  std::vector<std::shared_ptr<TransformerDecoderLayer>> decoder;
  std::shared_ptr<LayerNorm> encoder_norm, decoder_norm;  // pre-norm only (null for post-norm)
  std::shared_ptr<Linear> lm_head;

 private:
  Tensor add_positions(const Tensor& x, bool source) const;
  // The decoding loop of greedy_decode and sample_decode: `choose` picks row b's next token from its
  // logits [V] (float64).
  Tensor decode_loop(const Tensor& src, int64_t bos_id, int64_t eos_id, int64_t max_new_tokens, const char* caller,
                     const std::function<int64_t(std::span<const double>)>& choose) const;
};

}  // namespace tapegrad::nn
