// llama2c.cpp — reading llama2.c's model files, legacy version 0 and the "ak42" version 1 (see
// llama2c.h). Both share one table of arrays (run.c's names → ours, shapes) and differ only in the
// header and the order of the arrays; the whole layout is worked out from the header and checked
// against the file size before any weight is read.
#include "lm/llama2c.h"

#include <algorithm>
#include <array>
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
constexpr int64_t kHeaderBytesV0 = 7 * 4;
constexpr int64_t kHeaderBytesV1 = 256;
constexpr int64_t kParamsOffsetV1 = 8;       // after the magic and the version
constexpr int64_t kSharedFlagOffsetV1 = 36;  // after the 7 params

const char* const kFields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
// Sane upper bounds (Llama 2 70B: dim 8192, hidden 28672, 80 layers, 64 heads, vocab 32000, seq 4096).
const int64_t kMax[7] = {int64_t(1) << 16, int64_t(1) << 18, 1024, 1024, 1024, int64_t(1) << 22, int64_t(1) << 20};

// The validated header of either version.
struct Header {
  int version = 0;
  int64_t header_bytes = 0;
  int64_t dim = 0, hidden = 0, n_layers = 0, n_heads = 0, n_kv = 0, vocab = 0, seq = 0;
  bool shared = false;
  int64_t head() const { return dim / n_heads; }
  std::string describe() const {
    return fmt::format("version {}: dim={} hidden_dim={} n_layers={} n_heads={} n_kv_heads={} vocab_size={} "
                       "seq_len={} {} classifier",
                       version, dim, hidden, n_layers, n_heads, n_kv, vocab, seq, shared ? "shared" : "separate");
  }
};

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

// Every array either version can hold, by run.c's name: our parameter name and the shape.
Section section(const std::string& what, const Header& h) {
  const int64_t C = h.dim, F = h.hidden, V = h.vocab, L = h.n_layers, KV = h.n_kv * h.head();
  const std::vector<Section> table = {
      {"token_embedding", "token_embeddings.weight", {V, C}},
      {"rms_att", "layers.{}.ln1.weight", {C}, L},
      {"wq", "layers.{}.attn.q_proj.weight", {C, C}, L},
      {"wk", "layers.{}.attn.k_proj.weight", {KV, C}, L},
      {"wv", "layers.{}.attn.v_proj.weight", {KV, C}, L},
      {"wo", "layers.{}.attn.output_proj.weight", {C, C}, L},
      {"rms_ffn", "layers.{}.ln2.weight", {C}, L},
      {"w1", "layers.{}.ffn.w1.weight", {F, C}, L},
      {"w2", "layers.{}.ffn.w2.weight", {C, F}, L},
      {"w3", "layers.{}.ffn.w3.weight", {F, C}, L},
      {"rms_final", "ln_final.weight", {C}},
      {"freq_cis_real", "", {h.seq, h.head() / 2}},
      {"freq_cis_imag", "", {h.seq, h.head() / 2}},
      {"wcls", "lm_head.weight", {V, C}},
  };
  const auto it = std::find_if(table.begin(), table.end(), [&](const Section& s) { return s.what == what; });
  TG_CHECK(it != table.end(), "llama2c: internal: no array '{}'", what);
  return *it;
}

// The arrays in file order. v0 (export.py's legacy_export, run.c's input): the embedding, then per
// kind across layers, the RoPE tables, the classifier. v1 (export.py's version1_export): the norms
// first, then the embedding and the matrices, no RoPE tables, the classifier. Both store wq/wk as model.py holds them
// (interleaved RoPE pairs, our layout), so neither needs a row permutation.
std::vector<Section> layout(const Header& h) {
  const std::vector<const char*> v0 = {"token_embedding", "rms_att", "wq", "wk", "wv", "wo", "rms_ffn",
                                       "w1", "w2", "w3", "rms_final", "freq_cis_real", "freq_cis_imag"};
  const std::vector<const char*> v1 = {"rms_att", "rms_ffn", "rms_final", "token_embedding", "wq", "wk",
                                       "wv", "wo", "w1", "w2", "w3"};
  std::vector<Section> out;
  for (const char* what : h.version == 0 ? v0 : v1) out.push_back(section(what, h));
  if (!h.shared) out.push_back(section("wcls", h));
  return out;
}

// The 7 size fields (vocab_size already made positive), each at `base + 4·i` in the file.
void set_sizes(Header& h, const std::string& path, const std::array<int32_t, 7>& raw, int64_t base) {
  int64_t v[7];
  for (int i = 0; i < 7; ++i) {
    v[i] = i == 5 ? (raw[5] < 0 ? -int64_t(raw[5]) : int64_t(raw[5])) : int64_t(raw[i]);
    TG_CHECK(v[i] > 0 && v[i] <= kMax[i], "llama2c: '{}': header field {} (offset {}) is {}: must be in [1, {}]", path,
             kFields[i], base + 4 * i, raw[i], kMax[i]);
  }
  h.dim = v[0], h.hidden = v[1], h.n_layers = v[2], h.n_heads = v[3], h.n_kv = v[4], h.vocab = v[5], h.seq = v[6];
  TG_CHECK(h.dim % h.n_heads == 0, "llama2c: '{}': n_heads {} (offset {}) does not divide dim {}", path, h.n_heads,
           base + 12, h.dim);
  TG_CHECK(h.n_heads % h.n_kv == 0, "llama2c: '{}': n_kv_heads {} (offset {}) does not divide n_heads {}", path, h.n_kv,
           base + 16, h.n_heads);
  TG_CHECK(h.head() % 2 == 0, "llama2c: '{}': head size dim/n_heads = {} is odd (RoPE rotates pairs)", path, h.head());
}

void read_bytes(std::ifstream& f, const std::string& path, void* dst, size_t n, const char* what) {
  f.read(static_cast<char*>(dst), std::streamsize(n));
  TG_CHECK(f.good(), "llama2c: '{}': cannot read {}", path, what);
}

// v0: 7 int32, vocab_size < 0 meaning a separate classifier.
Header read_header_v0(std::ifstream& f, const std::string& path, uint64_t file_size) {
  TG_CHECK(file_size >= uint64_t(kHeaderBytesV0), "llama2c: '{}' is {} bytes, shorter than the {}-byte header", path,
           file_size, kHeaderBytesV0);
  std::array<int32_t, 7> raw;
  read_bytes(f, path, raw.data(), sizeof raw, "the header");
  Header h;
  h.version = 0;
  h.header_bytes = kHeaderBytesV0;
  h.shared = raw[5] > 0;
  set_sizes(h, path, raw, 0);
  return h;
}

// v1: u32 magic, i32 version, 7 int32 (vocab_size > 0), u8 shared_classifier, zeros up to 256 bytes.
Header read_header_v1(std::ifstream& f, const std::string& path, uint64_t file_size) {
  TG_CHECK(file_size >= uint64_t(kHeaderBytesV1),
           "llama2c: '{}' is {} bytes, shorter than the {}-byte \"ak42\" version-1 header", path, file_size,
           kHeaderBytesV1);
  std::array<unsigned char, kHeaderBytesV1> b;
  read_bytes(f, path, b.data(), b.size(), "the header");
  int32_t version;
  std::memcpy(&version, b.data() + 4, 4);
  TG_CHECK(version != 2,
           "llama2c: '{}' has the \"ak42\" header of version 2 (offset 4), export.py's int8 Q8_0 format: not "
           "supported; export it with --version 1 (float32) or --version 0",
           path);
  TG_CHECK(version == 1, "llama2c: '{}' has the \"ak42\" header with version {} (offset 4): only version 1 (and the "
           "headerless legacy version 0) can be read", path, version);
  std::array<int32_t, 7> raw;
  std::memcpy(raw.data(), b.data() + kParamsOffsetV1, sizeof raw);
  TG_CHECK(raw[5] > 0, "llama2c: '{}': header field vocab_size (offset {}) is {}: must be in [1, {}] (version 1 "
           "keeps the classifier flag at offset {})", path, kParamsOffsetV1 + 20, raw[5], kMax[5], kSharedFlagOffsetV1);
  const unsigned flag = b[kSharedFlagOffsetV1];
  TG_CHECK(flag <= 1, "llama2c: '{}': header field shared_classifier (offset {}) is {}: must be 0 or 1", path,
           kSharedFlagOffsetV1, flag);
  for (int64_t i = kSharedFlagOffsetV1 + 1; i < kHeaderBytesV1; ++i)
    TG_CHECK(b[size_t(i)] == 0, "llama2c: '{}': header padding byte at offset {} is {:#04x}: must be 0", path, i,
             unsigned(b[size_t(i)]));
  Header h;
  h.version = 1;
  h.header_bytes = kHeaderBytesV1;
  h.shared = flag == 1;
  set_sizes(h, path, raw, kParamsOffsetV1);
  return h;
}

// Every array must lie inside the file and the last must end exactly at its end.
void check_file_size(const std::string& path, const Header& h, const std::vector<Section>& sections,
                     uint64_t file_size) {
  // Offsets in uint64: with the bounds above every product stays far below 2^63.
  uint64_t expected = uint64_t(h.header_bytes);
  for (const Section& s : sections) {
    const uint64_t end = expected + 4 * s.floats();
    TG_CHECK(end <= file_size,
             "llama2c: '{}' is truncated: {} needs bytes [{}, {}) but the file has {} bytes (header {})", path, s.what,
             expected, end, file_size, h.describe());
    expected = end;
  }
  TG_CHECK(expected == file_size,
           "llama2c: '{}' has {} bytes after the last tensor (offset {}): not the file its header describes "
           "(header {})",
           path, file_size - expected, expected, h.describe());
}

nn::TransformerLMConfig make_config(const Header& h) {
  nn::TransformerLMConfig c;
  c.vocab_size = h.vocab;
  c.context_length = h.seq;
  c.d_model = h.dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv;
  c.d_ff = h.hidden;
  c.rope_theta = 10000.0;
  c.tie_embeddings = h.shared;
  c.eps = 1e-5;
  c.dtype = kFloat32;
  return c;
}

void read_weights(std::ifstream& f, const std::string& path, const Header& h, const std::vector<Section>& sections,
                  Llama2cModel& m) {
  uint64_t offset = uint64_t(h.header_bytes);
  for (const Section& s : sections) {
    for (int64_t l = 0; l < std::max<int64_t>(s.layers, 1); ++l) {
      Tensor t = empty(s.shape, kFloat32);
      f.read(reinterpret_cast<char*>(t.data<float>()), std::streamsize(4 * t.numel()));
      TG_CHECK(f.good(), "llama2c: '{}': read failed in {} at offset {}", path, s.what, offset);
      offset += 4 * uint64_t(t.numel());
      if (s.what == "freq_cis_real") m.freq_cis_real = t;
      else if (s.what == "freq_cis_imag") m.freq_cis_imag = t;
      else m.weights[layer_name(s.name, l)] = t;
    }
  }
}

}  // namespace

Llama2cModel read_llama2c_model(const std::string& path) {
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  TG_CHECK(!ec, "llama2c: cannot read '{}': {}", path, ec.message());
  std::ifstream f(path, std::ios::binary);
  TG_CHECK(f.good(), "llama2c: cannot open '{}'", path);
  uint32_t magic = 0;
  if (file_size >= 4) {
    read_bytes(f, path, &magic, 4, "the header");
    f.seekg(0);
  }
  const Header h = magic == kMagicV1 ? read_header_v1(f, path, file_size) : read_header_v0(f, path, file_size);
  const std::vector<Section> sections = layout(h);
  check_file_size(path, h, sections, file_size);

  Llama2cModel m;
  m.version = h.version;
  m.config = make_config(h);
  f.seekg(h.header_bytes);
  read_weights(f, path, h, sections, m);
  return m;
}

}  // namespace tapegrad::lm
