// llama2c.cpp — reading llama2.c's legacy model file (see llama2c.h). The whole layout is worked
// out from the header and checked against the file size before any weight is read.
#include "lm/llama2c.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "kernels/error.h"

namespace tapegrad::lm {

static_assert(std::endian::native == std::endian::little, "llama2.c files are little-endian");

namespace {

constexpr uint32_t kMagicV1 = 0x616b3432;  // "ak42": export.py --version 1 and later
constexpr int64_t kHeaderBytes = 7 * 4;

// One stored array: `layers` consecutive blocks of `shape` (layers = 0: a single array, no layer index).
struct Section {
  std::string what;      // run.c's name, for messages
  std::string name;      // our name; "{}" stands for the layer index; "" = not a parameter
  Shape shape;
  int64_t layers = 0;
  uint64_t floats() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= uint64_t(d);
    return n * uint64_t(layers > 0 ? layers : 1);
  }
};

std::string layer_name(const std::string& pattern, int64_t layer) {
  std::string s = pattern;
  const auto at = s.find("{}");
  if (at != std::string::npos) s.replace(at, 2, std::to_string(layer));
  return s;
}

}  // namespace

Llama2cModel read_llama2c_model(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  TG_CHECK(!ec, "llama2c: cannot read '{}': {}", path, ec.message());
  std::ifstream f(path, std::ios::binary);
  TG_CHECK(f.good(), "llama2c: cannot open '{}'", path);
  const uint64_t file_size = size;
  TG_CHECK(file_size >= uint64_t(kHeaderBytes), "llama2c: '{}' is {} bytes, shorter than the {}-byte header", path,
           file_size, kHeaderBytes);
  int32_t h[7];
  f.read(reinterpret_cast<char*>(h), sizeof h);
  TG_CHECK(f.good(), "llama2c: '{}': cannot read the header", path);
  TG_CHECK(uint32_t(h[0]) != kMagicV1,
           "llama2c: '{}' has the version-{} \"ak42\" header (export.py --version >= 1): not supported yet; "
           "export it with --version 0 (legacy)",
           path, h[1]);

  static const char* kFields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  // Sane upper bounds (Llama 2 70B: dim 8192, hidden 28672, 80 layers, 64 heads, vocab 32000, seq 4096).
  static const int64_t kMax[7] = {int64_t(1) << 16, int64_t(1) << 18, 1024, 1024, 1024, int64_t(1) << 22,
                                  int64_t(1) << 20};
  const bool shared = h[5] > 0;
  int64_t v[7];
  for (int i = 0; i < 7; ++i) {
    v[i] = i == 5 ? (h[5] < 0 ? -int64_t(h[5]) : int64_t(h[5])) : int64_t(h[i]);
    TG_CHECK(v[i] > 0 && v[i] <= kMax[i], "llama2c: '{}': header field {} (offset {}) is {}: must be in [1, {}]", path,
             kFields[i], 4 * i, h[i], kMax[i]);
  }
  const int64_t dim = v[0], hidden = v[1], n_layers = v[2], n_heads = v[3], n_kv = v[4], vocab = v[5], seq = v[6];
  TG_CHECK(dim % n_heads == 0, "llama2c: '{}': n_heads {} (offset 12) does not divide dim {}", path, n_heads, dim);
  TG_CHECK(n_heads % n_kv == 0, "llama2c: '{}': n_kv_heads {} (offset 16) does not divide n_heads {}", path, n_kv,
           n_heads);
  const int64_t head = dim / n_heads, kv_dim = n_kv * head;
  TG_CHECK(head % 2 == 0, "llama2c: '{}': head size dim/n_heads = {} is odd (RoPE rotates pairs)", path, head);

  const int64_t L = n_layers;
  std::vector<Section> sections = {
      {"token_embedding", "token_embeddings.weight", {vocab, dim}},
      {"rms_att", "layers.{}.ln1.weight", {dim}, L},
      {"wq", "layers.{}.attn.q_proj.weight", {dim, dim}, L},
      {"wk", "layers.{}.attn.k_proj.weight", {kv_dim, dim}, L},
      {"wv", "layers.{}.attn.v_proj.weight", {kv_dim, dim}, L},
      {"wo", "layers.{}.attn.output_proj.weight", {dim, dim}, L},
      {"rms_ffn", "layers.{}.ln2.weight", {dim}, L},
      {"w1", "layers.{}.ffn.w1.weight", {hidden, dim}, L},
      {"w2", "layers.{}.ffn.w2.weight", {dim, hidden}, L},
      {"w3", "layers.{}.ffn.w3.weight", {hidden, dim}, L},
      {"rms_final", "ln_final.weight", {dim}},
      {"freq_cis_real", "", {seq, head / 2}},
      {"freq_cis_imag", "", {seq, head / 2}},
  };
  if (!shared) sections.push_back({"wcls", "lm_head.weight", {vocab, dim}});

  // Offsets in uint64: with the bounds above every product stays far below 2^63.
  uint64_t expected = uint64_t(kHeaderBytes);
  for (const Section& s : sections) {
    const uint64_t end = expected + 4 * s.floats();
    TG_CHECK(end <= file_size,
             "llama2c: '{}' is truncated: {} needs bytes [{}, {}) but the file has {} bytes (header dim={} "
             "hidden_dim={} n_layers={} n_heads={} n_kv_heads={} vocab_size={} seq_len={})",
             path, s.what, expected, end, file_size, dim, hidden, n_layers, n_heads, n_kv, h[5], seq);
    expected = end;
  }
  TG_CHECK(expected == file_size,
           "llama2c: '{}' has {} bytes after the last tensor (offset {}): not the file its header describes "
           "(dim={} hidden_dim={} n_layers={} n_heads={} n_kv_heads={} vocab_size={} seq_len={})",
           path, file_size - expected, expected, dim, hidden, n_layers, n_heads, n_kv, h[5], seq);

  Llama2cModel m;
  nn::TransformerLMConfig& c = m.config;
  c.vocab_size = vocab;
  c.context_length = seq;
  c.d_model = dim;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv;
  c.d_ff = hidden;
  c.rope_theta = 10000.0;
  c.tie_embeddings = shared;
  c.eps = 1e-5;
  c.dtype = kFloat32;

  uint64_t offset = uint64_t(kHeaderBytes);
  auto read_into = [&](const Section& s, Tensor& t) {
    f.read(reinterpret_cast<char*>(t.data<float>()), std::streamsize(4 * t.numel()));
    TG_CHECK(f.good(), "llama2c: '{}': read failed in {} at offset {}", path, s.what, offset);
    offset += 4 * uint64_t(t.numel());
  };
  for (const Section& s : sections) {
    for (int64_t l = 0; l < std::max<int64_t>(s.layers, 1); ++l) {
      Tensor t = empty(s.shape, kFloat32);
      read_into(s, t);
      if (s.what == "freq_cis_real") m.freq_cis_real = t;
      else if (s.what == "freq_cis_imag") m.freq_cis_imag = t;
      else m.weights[layer_name(s.name, l)] = t;
    }
  }
  return m;
}

}  // namespace tapegrad::lm
