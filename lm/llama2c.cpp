// llama2c.cpp — reading llama2.c's model files, legacy version 0 and the "ak42" versions 1 (float32)
// and 2 (int8 Q8_0) (see llama2c.h). All share one table of arrays (run.c's names → ours, shapes) and
// differ in the header, the order of the arrays and (v2) how a matrix is stored; the whole layout is
// worked out from the header and checked against the file size before any weight is read.
#include "lm/llama2c.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "kernels/error.h"
#include "lm/llama2c_layout.h"
#include "lm/model_budget.h"
#include "nn/module.h"

namespace tapegrad::lm {

static_assert(std::endian::native == std::endian::little, "llama2.c files are little-endian");

namespace {

constexpr uint32_t kMagicV1 = 0x616b3432;  // "ak42": export.py --version 1 and later
constexpr int64_t kHeaderBytesV0 = 7 * 4;
constexpr int64_t kHeaderBytesV1 = 256;
constexpr int64_t kParamsOffsetV1 = 8;       // after the magic and the version
constexpr int64_t kSharedFlagOffsetV1 = 36;  // after the 7 params
constexpr int64_t kGroupOffsetV2 = 37;       // version 2: int32 group_size right after the flag (unaligned)

const char* const kFields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
// Sane upper bounds (Llama 2 70B: dim 8192, hidden 28672, 80 layers, 64 heads, vocab 32000, seq 4096).
const int64_t kMax[7] = {int64_t(1) << 16, int64_t(1) << 18, 1024, 1024, 1024, int64_t(1) << 22, int64_t(1) << 20};

// The validated header of any version.
struct Header {
  int version = 0;
  int64_t header_bytes = 0;
  int64_t dim = 0, hidden = 0, n_layers = 0, n_heads = 0, n_kv = 0, vocab = 0, seq = 0;
  bool shared = false;
  int64_t group = 0;  // version 2: the Q8_0 group size
  int64_t head() const { return dim / n_heads; }
  std::string describe() const {
    return fmt::format("version {}: dim={} hidden_dim={} n_layers={} n_heads={} n_kv_heads={} vocab_size={} "
                       "seq_len={} {} classifier{}",
                       version, dim, hidden, n_layers, n_heads, n_kv, vocab, seq, shared ? "shared" : "separate",
                       version == 2 ? fmt::format(" group_size={}", group) : "");
  }
};

// One stored array: `layers` consecutive blocks of `shape` (layers = 0: a single array, no layer index).
// A quantized one (the matrices of version 2) stores each block as int8 values then float32 scales.
struct Section {
  std::string what;      // run.c's name, for messages
  std::string name;      // our name; "{}" stands for the layer index; "" = not a parameter
  Shape shape;
  int64_t layers = 0;
  const char* row = "";  // the header field that is the row length of a matrix: "dim" or "hidden_dim"
  int64_t group = 0;     // > 0: quantized in groups of this many values
  uint64_t block_numel() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= uint64_t(d);
    return n;
  }
  uint64_t block_bytes() const {
    return group > 0 ? block_numel() + 4 * (block_numel() / uint64_t(group)) : 4 * block_numel();
  }
  uint64_t bytes() const { return block_bytes() * uint64_t(layers > 0 ? layers : 1); }
  // "wq of layer 3", "token_embedding"
  std::string where(int64_t layer) const {
    return layers > 0 ? fmt::format("{} of layer {}", what, layer) : what;
  }
};

// The arrays in file order (lm/llama2c_layout.h); v2 quantizes every matrix in the header's groups.
std::vector<Section> layout(const Header& h) {
  std::vector<Section> out;
  for (const Llama2cArray& a : llama2c_layout(h.version, {h.dim, h.hidden, h.n_layers, h.n_heads, h.n_kv, h.vocab,
                                                          h.seq, h.shared})) {
    const int64_t group = h.version == 2 && a.shape.size() == 2 ? h.group : 0;
    out.push_back({a.what, a.name, Shape(a.shape), a.per_layer ? h.n_layers : 0, a.row, group});
  }
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

// v1 and v2: u32 magic, i32 version, 7 int32 (vocab_size > 0), u8 shared_classifier, (v2) i32
// group_size, zeros up to 256 bytes.
Header read_header_ak42(std::ifstream& f, const std::string& path, uint64_t file_size) {
  TG_CHECK(file_size >= uint64_t(kHeaderBytesV1),
           "llama2c: '{}' is {} bytes, shorter than the {}-byte \"ak42\" header of versions 1 and 2", path,
           file_size, kHeaderBytesV1);
  std::array<unsigned char, kHeaderBytesV1> b;
  read_bytes(f, path, b.data(), b.size(), "the header");
  int32_t version;
  std::memcpy(&version, b.data() + 4, 4);
  TG_CHECK(version == 1 || version == 2,
           "llama2c: '{}' has the \"ak42\" header with version {} (offset 4): only versions 1 (float32) and 2 "
           "(int8 Q8_0) (and the headerless legacy version 0) can be read",
           path, version);
  std::array<int32_t, 7> raw;
  std::memcpy(raw.data(), b.data() + kParamsOffsetV1, sizeof raw);
  TG_CHECK(raw[5] > 0, "llama2c: '{}': header field vocab_size (offset {}) is {}: must be in [1, {}] (version {} "
           "keeps the classifier flag at offset {})", path, kParamsOffsetV1 + 20, raw[5], kMax[5], version,
           kSharedFlagOffsetV1);
  const unsigned flag = b[kSharedFlagOffsetV1];
  TG_CHECK(flag <= 1, "llama2c: '{}': header field shared_classifier (offset {}) is {}: must be 0 or 1", path,
           kSharedFlagOffsetV1, flag);
  Header h;
  h.version = version;
  h.header_bytes = kHeaderBytesV1;
  h.shared = flag == 1;
  int64_t padding = kSharedFlagOffsetV1 + 1;
  if (version == 2) {
    int32_t group;
    std::memcpy(&group, b.data() + kGroupOffsetV2, 4);
    TG_CHECK(group > 0, "llama2c: '{}': header field group_size (offset {}) is {}: must be positive", path,
             kGroupOffsetV2, group);
    h.group = group;
    padding = kGroupOffsetV2 + 4;
  }
  for (int64_t i = padding; i < kHeaderBytesV1; ++i)
    TG_CHECK(b[size_t(i)] == 0, "llama2c: '{}': header padding byte at offset {} is {:#04x}: must be 0", path, i,
             unsigned(b[size_t(i)]));
  set_sizes(h, path, raw, kParamsOffsetV1);
  return h;
}

// Version 2: the group size must divide every row (dim, hidden_dim), so that runq.c's groups over the
// flattened matrices are per-row groups (ours) and its activations (dim or hidden_dim long) split evenly.
void check_groups(const std::string& path, const Header& h, const std::vector<Section>& sections) {
  for (const Section& s : sections) {
    if (s.group == 0) continue;
    const int64_t cols = s.shape[1];
    TG_CHECK(cols % s.group == 0,
             "llama2c: '{}': header field group_size (offset {}) is {}, which does not divide {} {}, the row length "
             "of {} [{}, {}]: the Q8_0 groups must not straddle rows (header {})",
             path, kGroupOffsetV2, s.group, s.row, cols, s.what, s.shape[0], cols, h.describe());
  }
}

// Every array must lie inside the file and the last must end exactly at its end.
void check_file_size(const std::string& path, const Header& h, const std::vector<Section>& sections,
                     uint64_t file_size) {
  // Offsets in uint64: with the bounds above every product stays far below 2^63.
  uint64_t expected = uint64_t(h.header_bytes);
  for (const Section& s : sections) {
    const uint64_t end = expected + s.bytes();
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

// One matrix of version 2: its int8 values (none −128), then its scales (finite, ≥ 0).
kernels::Int8Matrix read_quantized(std::ifstream& f, const std::string& path, const Section& s, int64_t layer,
                                   uint64_t offset) {
  kernels::Int8Matrix m;
  m.rows = s.shape[0], m.cols = s.shape[1], m.group = s.group;
  m.q.resize(size_t(m.rows * m.cols));
  m.scales.resize(size_t(m.rows * m.groups_per_row()));
  f.read(reinterpret_cast<char*>(m.q.data()), std::streamsize(m.q.size()));
  TG_CHECK(f.good(), "llama2c: '{}': read failed in the values of {} at offset {}", path, s.where(layer), offset);
  for (size_t i = 0; i < m.q.size(); ++i)
    TG_CHECK(m.q[i] != -128,
             "llama2c: '{}': {} has the int8 value -128 at offset {} (row {}, column {}): Q8_0 values are in "
             "[-127, 127]",
             path, s.where(layer), offset + i, int64_t(i) / m.cols, int64_t(i) % m.cols);
  offset += m.q.size();
  f.read(reinterpret_cast<char*>(m.scales.data()), std::streamsize(4 * m.scales.size()));
  TG_CHECK(f.good(), "llama2c: '{}': read failed in the scales of {} at offset {}", path, s.where(layer), offset);
  const int64_t gpr = m.groups_per_row();
  for (size_t i = 0; i < m.scales.size(); ++i)
    TG_CHECK(std::isfinite(m.scales[i]) && m.scales[i] >= 0.0f,
             "llama2c: '{}': {} has the scale {} at offset {} (row {}, group {}): scales must be finite and >= 0",
             path, s.where(layer), m.scales[i], offset + 4 * i, int64_t(i) / gpr, int64_t(i) % gpr);
  return m;
}

void read_weights(std::ifstream& f, const std::string& path, const Header& h, const std::vector<Section>& sections,
                  Llama2cModel& m) {
  uint64_t offset = uint64_t(h.header_bytes);
  for (const Section& s : sections) {
    for (int64_t l = 0; l < std::max<int64_t>(s.layers, 1); ++l) {
      if (s.group > 0) {
        m.int8_weights[llama2c_layer_name(s.name, l)] = read_quantized(f, path, s, l, offset);
        offset += s.block_bytes();
        continue;
      }
      Tensor t = empty(s.shape, kFloat32);
      f.read(reinterpret_cast<char*>(t.data<float>()), std::streamsize(4 * t.numel()));
      TG_CHECK(f.good(), "llama2c: '{}': read failed in {} at offset {}", path, s.what, offset);
      offset += 4 * uint64_t(t.numel());
      if (s.what == "freq_cis_real") m.freq_cis_real = t;
      else if (s.what == "freq_cis_imag") m.freq_cis_imag = t;
      else m.weights[llama2c_layer_name(s.name, l)] = t;
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
  const Header h = magic == kMagicV1 ? read_header_ak42(f, path, file_size) : read_header_v0(f, path, file_size);
  const std::vector<Section> sections = layout(h);
  check_groups(path, h, sections);
  check_file_size(path, h, sections, file_size);

  Llama2cModel m;
  m.version = h.version;
  m.config = make_config(h);
  // The file holds every value of its sections (checked above); the RoPE tables and KV cache of the model
  // made from it (make_llama2c_model, generate) grow with seq_len × head size alone: bounded by those values.
  double values = 0;
  for (const Section& s : sections) values += double(s.block_numel()) * double(s.layers > 0 ? s.layers : 1);
  check_model_allocation(m.config, values, fmt::format("llama2c: '{}'", path), "seq_len");
  m.group_size = h.group;
  f.seekg(h.header_bytes);
  read_weights(f, path, h, sections, m);
  return m;
}

std::unique_ptr<nn::TransformerLM> make_llama2c_model(Llama2cModel m) {
  std::unique_ptr<nn::TransformerLM> model;
  {
    nn::SkipParameterInitGuard no_init;  // every weight is set below
    model = std::make_unique<nn::TransformerLM>(m.config);
  }
  std::map<std::string, nn::Linear*> linears;
  for (const auto& [prefix, linear] : model->named_linears()) linears[prefix + ".weight"] = linear.get();
  for (auto& [name, w] : m.int8_weights) {
    if (name == "token_embeddings.weight") {
      model->token_embeddings->set_int8_weight(std::move(w));
      continue;
    }
    const auto it = linears.find(name);
    TG_CHECK(it != linears.end(), "llama2c: internal: the model has no Linear for {}", name);
    it->second->set_int8_weight(std::move(w));
  }
  model->load_state_dict(m.weights);  // strict: exactly the parameters that stayed float
  return model;
}

}  // namespace tapegrad::lm
