// encoder_decoder.cpp — construction, encode / decode / forward, greedy decoding and sampling.
#include "nn/encoder_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tapegrad::nn {

namespace {
const EncoderDecoderConfig& validated(const EncoderDecoderConfig& c) {
  TG_CHECK(c.src_vocab_size > 0 && c.tgt_vocab_size > 0 && c.max_len > 0 && c.d_model > 0 && c.n_heads > 0 &&
               c.d_ff > 0,
           "EncoderDecoder: vocab sizes {} / {}, max_len {}, d_model {}, n_heads {}, d_ff {} must be positive",
           c.src_vocab_size, c.tgt_vocab_size, c.max_len, c.d_model, c.n_heads, c.d_ff);
  TG_CHECK(c.n_encoder_layers >= 0 && c.n_decoder_layers >= 0, "EncoderDecoder: layer counts must be ≥ 0");
  TG_CHECK(c.d_model % c.n_heads == 0, "EncoderDecoder: d_model {} is not divisible by n_heads {}", c.d_model,
           c.n_heads);
  TG_CHECK(c.pad_id < c.src_vocab_size && c.pad_id < c.tgt_vocab_size,
           "EncoderDecoder: pad_id {} is outside the vocabularies", c.pad_id);
  return c;
}
}  // namespace

TransformerLayerConfig EncoderDecoderConfig::layer_config() const {
  TransformerLayerConfig l;
  l.d_model = d_model;
  l.n_heads = n_heads;
  l.d_ff = d_ff;
  l.dropout = dropout;
  l.activation = activation;
  l.norm_first = norm_first;
  l.eps = eps;
  l.bias = bias;
  l.dtype = dtype;
  return l;
}

EncoderDecoder::EncoderDecoder(const EncoderDecoderConfig& c, Generator* gen, std::shared_ptr<Generator> dgen)
    : config(validated(c)) {
  const DType dt = c.dtype;
  src_embeddings = register_module("src_embeddings", std::make_shared<Embedding>(c.src_vocab_size, c.d_model, dt, gen));
  tgt_embeddings = register_module("tgt_embeddings", std::make_shared<Embedding>(c.tgt_vocab_size, c.d_model, dt, gen));
  if (c.positional == PositionalKind::Sinusoidal) {
    sinusoidal = register_module("positions", std::make_shared<SinusoidalPositionalEncoding>(c.max_len, c.d_model, dt));
  } else {
    src_positions = register_module("src_positions", std::make_shared<LearnedPositionalEmbedding>(c.max_len, c.d_model, dt, gen));
    tgt_positions = register_module("tgt_positions", std::make_shared<LearnedPositionalEmbedding>(c.max_len, c.d_model, dt, gen));
  }
  const TransformerLayerConfig lc = c.layer_config();
  encoder_layers = register_module("encoder_layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < c.n_encoder_layers; ++i)
    encoder.push_back(encoder_layers->push_back(std::make_shared<TransformerEncoderLayer>(lc, gen, dgen)));
  decoder_layers = register_module("decoder_layers", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < c.n_decoder_layers; ++i)
    decoder.push_back(decoder_layers->push_back(std::make_shared<TransformerDecoderLayer>(lc, gen, dgen)));
  if (c.norm_first) {
    encoder_norm = register_module("encoder_norm", std::make_shared<LayerNorm>(c.d_model, c.eps, true, dt));
    decoder_norm = register_module("decoder_norm", std::make_shared<LayerNorm>(c.d_model, c.eps, true, dt));
  }
  lm_head = register_module("lm_head", std::make_shared<Linear>(c.d_model, c.tgt_vocab_size, c.bias, dt, gen));
}

Tensor EncoderDecoder::padding_mask(const Tensor& ids) const {
  return config.pad_id >= 0 ? key_padding_mask(ids, config.pad_id) : Tensor();
}

Tensor EncoderDecoder::add_positions(const Tensor& x, bool source) const {
  if (sinusoidal) return sinusoidal->forward(x);
  return (source ? src_positions : tgt_positions)->forward(x);
}

Tensor EncoderDecoder::encode(const Tensor& src) const {
  TG_CHECK(src.defined() && src.dim() == 2, "EncoderDecoder: source ids must be [B, S]");
  Tensor mask = padding_mask(src);                          // [B, S] or undefined
  Tensor x = add_positions(src_embeddings->forward(src), true);  // [B, S, C]
  for (const auto& layer : encoder) x = layer->forward(x, mask);
  return encoder_norm ? encoder_norm->forward(x) : x;       // memory [B, S, C]
}

Tensor EncoderDecoder::decode(const Tensor& tgt, const Tensor& memory, const Tensor& memory_mask) const {
  TG_CHECK(tgt.defined() && tgt.dim() == 2, "EncoderDecoder: target ids must be [B, T]");
  Tensor mask = padding_mask(tgt);                          // [B, T] or undefined
  Tensor x = add_positions(tgt_embeddings->forward(tgt), false);  // [B, T, C]
  for (const auto& layer : decoder) x = layer->forward(x, memory, mask, memory_mask);
  if (decoder_norm) x = decoder_norm->forward(x);
  return lm_head->forward(x);                               // [B, T, V]
}

Tensor EncoderDecoder::forward(const Tensor& src, const Tensor& tgt) const {
  TG_CHECK(src.defined() && tgt.defined() && src.dim() == 2 && tgt.dim() == 2 && src.size(0) == tgt.size(0),
           "EncoderDecoder: need src [B, S] and tgt [B, T] with the same B");
  return decode(tgt, encode(src), padding_mask(src));
}

void SamplingOptions::validate() const {
  TG_CHECK(std::isfinite(temperature) && temperature >= 0,
           "sampling: temperature must be a finite number >= 0 (0: greedy), but is {}", temperature);
  TG_CHECK(top_k >= 0, "sampling: top_k must be >= 0 (0: every token), but is {}", top_k);
}

int64_t sample_token(std::span<const double> z, const SamplingOptions& options, Generator& gen) {
  options.validate();
  TG_CHECK(!z.empty(), "sample_token: the logits are empty");
  const int64_t V = static_cast<int64_t>(z.size());
  double max_z = -std::numeric_limits<double>::infinity();
  int64_t arg_max = -1;
  for (int64_t i = 0; i < V; ++i) {
    TG_CHECK(!std::isnan(z[i]) && z[i] != std::numeric_limits<double>::infinity(),
             "sample_token: logit {} is {} (must be finite or -inf)", i, z[i]);
    if (z[i] > max_z) max_z = z[i], arg_max = i;  // strict: the lowest id among equal maxima
  }
  TG_CHECK(arg_max >= 0, "sample_token: every logit is -inf");
  if (options.temperature == 0 || options.top_k == 1) return arg_max;

  // Which tokens stay: all, or the k highest logits (equal logits: the lower id first).
  const bool truncate = options.top_k > 0 && options.top_k < V;
  std::vector<bool> kept(static_cast<size_t>(V), !truncate);
  if (truncate) {
    std::vector<int64_t> order(static_cast<size_t>(V));
    for (int64_t i = 0; i < V; ++i) order[static_cast<size_t>(i)] = i;
    const auto higher = [&](int64_t a, int64_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
    std::partial_sort(order.begin(), order.begin() + options.top_k, order.end(), higher);
    for (int64_t r = 0; r < options.top_k; ++r) kept[static_cast<size_t>(order[static_cast<size_t>(r)])] = true;
  }
  // p_i ∝ exp((z_i − max z)/T) over the kept ids; one uniform u picks the first id (in id order)
  // whose cumulative weight exceeds u · Σ weights. (−inf logits have weight 0: never picked.)
  std::vector<double> w(static_cast<size_t>(V), 0.0);
  double total = 0;
  for (int64_t i = 0; i < V; ++i)
    if (kept[static_cast<size_t>(i)]) total += w[static_cast<size_t>(i)] = std::exp((z[i] - max_z) / options.temperature);
  const double target = gen.uniform() * total;
  double cumulative = 0;
  int64_t last_positive = arg_max;
  for (int64_t i = 0; i < V; ++i) {
    if (w[static_cast<size_t>(i)] <= 0) continue;
    cumulative += w[static_cast<size_t>(i)];
    last_positive = i;
    if (cumulative > target) return i;
  }
  return last_positive;  // only reached through rounding when u is within an ulp of 1
}

Tensor EncoderDecoder::greedy_decode(const Tensor& src, int64_t bos_id, int64_t eos_id, int64_t max_new) const {
  return decode_loop(src, bos_id, eos_id, max_new, "greedy_decode", [](std::span<const double> z) {
    return static_cast<int64_t>(std::max_element(z.begin(), z.end()) - z.begin());  // the first maximum
  });
}

Tensor EncoderDecoder::sample_decode(const Tensor& src, int64_t bos_id, int64_t eos_id, int64_t max_new,
                                     const SamplingOptions& options, Generator& gen) const {
  options.validate();
  return decode_loop(src, bos_id, eos_id, max_new, "sample_decode",
                     [&](std::span<const double> z) { return sample_token(z, options, gen); });
}

Tensor EncoderDecoder::decode_loop(const Tensor& src, int64_t bos_id, int64_t eos_id, int64_t max_new,
                                   const char* caller,
                                   const std::function<int64_t(std::span<const double>)>& choose) const {
  TG_CHECK(src.defined() && src.dim() == 2, "{}: source ids must be [B, S]", caller);
  TG_CHECK(max_new >= 1 && max_new + 1 <= config.max_len, "{}: max_new_tokens {} must be in [1, max_len − 1 = {}]",
           caller, max_new, config.max_len - 1);
  TG_CHECK(bos_id >= 0 && bos_id < config.tgt_vocab_size && eos_id >= 0 && eos_id < config.tgt_vocab_size,
           "{}: bos_id {} and eos_id {} must be target ids in [0, {})", caller, bos_id, eos_id, config.tgt_vocab_size);
  NoGradGuard no_grad;
  const int64_t B = src.size(0), V = config.tgt_vocab_size;
  const int64_t fill = config.pad_id >= 0 ? config.pad_id : eos_id;
  Tensor memory = encode(src);
  Tensor memory_mask = padding_mask(src);
  std::vector<int64_t> seq(static_cast<size_t>(B), bos_id);  // [B, t] row-major, t = 1 + produced
  std::vector<bool> done(static_cast<size_t>(B), false);
  int64_t t = 1;
  while (t - 1 < max_new) {
    Tensor logits = decode(from_vector<int64_t>(seq, {B, t}), memory, memory_mask);  // [B, t, V]
    const std::vector<double> last = logits.select(1, t - 1).to(kFloat64).to_vector<double>();  // [B, V]
    std::vector<int64_t> grown;
    grown.reserve(static_cast<size_t>(B * (t + 1)));
    bool all_done = true;
    for (int64_t b = 0; b < B; ++b) {
      grown.insert(grown.end(), seq.begin() + b * t, seq.begin() + (b + 1) * t);
      const int64_t tok = done[static_cast<size_t>(b)]
                              ? fill
                              : choose(std::span<const double>(last).subspan(static_cast<size_t>(b * V),
                                                                             static_cast<size_t>(V)));
      grown.push_back(tok);
      if (tok == eos_id) done[static_cast<size_t>(b)] = true;
      all_done = all_done && done[static_cast<size_t>(b)];
    }
    seq = std::move(grown);
    ++t;
    if (all_done) break;
  }
  // Drop the BOS column.
  return from_vector<int64_t>(seq, {B, t}).slice(1, 1, t).contiguous();
}

}  // namespace tapegrad::nn
