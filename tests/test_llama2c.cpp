// test_llama2c.cpp — llama2.c models and tokenizers (lm/llama2c.h, lm/llama2c_tokenizer.h) on the real
// stories260K.bin / tok512.bin in ../shared/data/llama2c (skipped with a warning when absent):
//   * the logits of our float32 TransformerLM agree (≤ 1e-4 absolute) with a plain float64 forward written
//     here straight from the file's arrays, as run.c computes it; the stored RoPE tables are our convention;
//   * truncated, extended and corrupted files are refused with tapegrad::Error, never read out of bounds;
//   * encode gives run.c's ids, decode round-trips; damaged tokenizer files are refused;
//   * version-1 ("ak42") files written here from the same arrays (shared and separate classifier) load
//     to the same parameters bit for bit and the same logits, through the library and the tool; truncated,
//     extended and corrupted ones (version, shared_classifier, padding, sizes, random bytes) are refused;
//   * export (lm/llama2c_export.h, `tapegrad export llama2c`): versions 0 and 1 read back bit for bit;
//     version 2 holds exactly kernels::quantize_int8's values and scales, and an int8 model re-exports to
//     the same bytes; run.c and runq.c (built with gcc when present) run our exports; damaged version-2
//     files and inexpressible exports are refused with one error, nothing written.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <unistd.h>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "kernels/int8.h"
#include "lm/llama2c.h"
#include "lm/llama2c_export.h"
#include "lm/llama2c_tokenizer.h"
#include "tests/shared_fixture.h"
#include "tool_runner.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

// stories260K and its tokenizer, under ../shared (skipped without it: tests/shared_fixture.h). The paths are
// filled in by require_files(), which every test that reads them calls first.
std::string kModel, kTok;

void require_files() {
  kModel = testing::shared_path("data/llama2c/stories260K.bin");
  kTok = testing::shared_path("data/llama2c/tok512.bin");
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("tapegrad_llama2c_" + std::to_string(::getpid()) + "_" + name)).string();
}

// A plain float64 forward of a llama2.c legacy file, from its raw arrays (run.c's order and rules).
struct Reference {
  int dim, hidden, layers, heads, kv_heads, vocab, seq;
  std::vector<double> w;  // every float after the header
  size_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final;

  explicit Reference(const std::string& bytes) {
    int32_t h[7];
    std::memcpy(h, bytes.data(), sizeof h);
    dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4], vocab = std::abs(h[5]), seq = h[6];
    std::vector<float> f((bytes.size() - 28) / 4);
    std::memcpy(f.data(), bytes.data() + 28, f.size() * 4);
    w.assign(f.begin(), f.end());
    const size_t kv_dim = size_t(dim / heads * kv_heads), L = size_t(layers);
    size_t at = 0;
    auto take = [&](size_t n) { const size_t s = at; at += n; return s; };
    emb = take(size_t(vocab) * dim);
    rms_att = take(L * dim);
    wq = take(L * dim * dim);
    wk = take(L * kv_dim * dim);
    wv = take(L * kv_dim * dim);
    wo = take(L * dim * dim);
    rms_ffn = take(L * dim);
    w1 = take(L * hidden * dim);
    w2 = take(L * dim * hidden);
    w3 = take(L * hidden * dim);
    rms_final = take(dim);
  }

  std::vector<double> rmsnorm(const std::vector<double>& x, size_t weight) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double r = 1.0 / std::sqrt(ss / double(x.size()) + 1e-5);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = w[weight + i] * x[i] * r;
    return y;
  }
  // W [out, in] at `at` times x [in]
  std::vector<double> matvec(size_t at, const std::vector<double>& x, size_t out) const {
    std::vector<double> y(out, 0.0);
    for (size_t o = 0; o < out; ++o)
      for (size_t i = 0; i < x.size(); ++i) y[o] += w[at + o * x.size() + i] * x[i];
    return y;
  }
  void rope(std::vector<double>& v, int pos) const {
    const int hs = dim / heads;
    for (size_t i = 0; i < v.size(); i += 2) {
      const int k = int(i % size_t(hs));  // the even index within the head
      const double a = pos * std::pow(10000.0, -double(k) / hs);
      const double x0 = v[i], x1 = v[i + 1];
      v[i] = x0 * std::cos(a) - x1 * std::sin(a);
      v[i + 1] = x0 * std::sin(a) + x1 * std::cos(a);
    }
  }

  // logits [T][V] for the ids
  std::vector<std::vector<double>> forward(const std::vector<int>& ids) const {
    const int T = int(ids.size()), hs = dim / heads, kv_dim = hs * kv_heads, group = heads / kv_heads;
    std::vector<std::vector<double>> x(T, std::vector<double>(dim));
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < dim; ++i) x[t][i] = w[emb + size_t(ids[t]) * dim + i];
    for (int l = 0; l < layers; ++l) {
      std::vector<std::vector<double>> q(T), k(T), v(T);
      for (int t = 0; t < T; ++t) {
        const auto xn = rmsnorm(x[t], rms_att + size_t(l) * dim);
        q[t] = matvec(wq + size_t(l) * dim * dim, xn, dim);
        k[t] = matvec(wk + size_t(l) * kv_dim * dim, xn, kv_dim);
        v[t] = matvec(wv + size_t(l) * kv_dim * dim, xn, kv_dim);
        rope(q[t], t);
        rope(k[t], t);
      }
      for (int t = 0; t < T; ++t) {
        std::vector<double> att(dim, 0.0);
        for (int h = 0; h < heads; ++h) {
          const int kvh = h / group;
          std::vector<double> s(t + 1);
          double mx = -1e300;
          for (int u = 0; u <= t; ++u) {
            double d = 0;
            for (int i = 0; i < hs; ++i) d += q[t][h * hs + i] * k[u][kvh * hs + i];
            s[u] = d / std::sqrt(double(hs));
            mx = std::max(mx, s[u]);
          }
          double z = 0;
          for (double& e : s) z += (e = std::exp(e - mx));
          for (int u = 0; u <= t; ++u)
            for (int i = 0; i < hs; ++i) att[h * hs + i] += s[u] / z * v[u][kvh * hs + i];
        }
        const auto o = matvec(wo + size_t(l) * dim * dim, att, dim);
        for (int i = 0; i < dim; ++i) x[t][i] += o[i];
        const auto xn = rmsnorm(x[t], rms_ffn + size_t(l) * dim);
        auto a = matvec(w1 + size_t(l) * hidden * dim, xn, hidden);
        const auto b = matvec(w3 + size_t(l) * hidden * dim, xn, hidden);
        for (int i = 0; i < hidden; ++i) a[i] = a[i] / (1 + std::exp(-a[i])) * b[i];
        const auto f = matvec(w2 + size_t(l) * dim * hidden, a, dim);
        for (int i = 0; i < dim; ++i) x[t][i] += f[i];
      }
    }
    std::vector<std::vector<double>> logits(T);
    for (int t = 0; t < T; ++t) logits[t] = matvec(emb, rmsnorm(x[t], rms_final), vocab);  // shared classifier
    return logits;
  }
};

// The ids run.c gives for these prompts: obtained by building a copy of
// ../shared/bench/peers/llama2c/run.c in /tmp with one added line in generate() that prints
// prompt_tokens[] to stderr after encode(), then `run stories260K.bin -z tok512.bin -t 0 -n 2 -i PROMPT`.
struct RunCIds {
  const char* prompt;
  std::vector<uint32_t> ids;
};
const std::vector<RunCIds> kRunCIds = {
    {"Once upon a time", {1, 403, 407, 261, 378}},
    {"", {1}},
    {"a", {1, 261}},
    {"h\xc3\xa9llo w\xc3\xb6rld \xe6\x97\xa5\xe6\x9c\xac \xe2\x9c\x93!",  // "héllo wörld 日本 ✓!"
     {1, 270, 485, 306, 414, 263, 198, 185, 420, 341, 410, 233, 154, 168, 233, 159, 175, 410, 229, 159, 150, 443}},
};

}  // namespace

TEST_CASE("llama2c: stories260K loads with its config and our parameter names", "[llama2c]") {
  require_files();
  const lm::Llama2cModel m = lm::read_llama2c_model(kModel);
  const nn::TransformerLMConfig& c = m.config;
  CHECK(c.d_model == 64);
  CHECK(c.d_ff == 172);
  CHECK(c.n_layers == 5);
  CHECK(c.n_heads == 8);
  CHECK(c.n_kv_heads == 4);
  CHECK(c.vocab_size == 512);
  CHECK(c.context_length == 512);
  CHECK(c.tie_embeddings);
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.eps == 1e-5);
  CHECK(m.weights.size() == 2 + 9 * 5);
  CHECK(m.weights.at("layers.4.attn.k_proj.weight").shape() == Shape{32, 64});
  CHECK(m.weights.at("layers.0.ffn.w2.weight").shape() == Shape{64, 172});
  nn::TransformerLM lm(c);
  lm.load_state_dict(m.weights);  // strict

  // The stored RoPE tables are cos/sin of pos · 10000^(−2k/D): the interleaved convention of our RoPE.
  REQUIRE(m.freq_cis_real.shape() == Shape{512, 4});
  const Tensor cr = m.freq_cis_real.to(kFloat64).contiguous(), ci = m.freq_cis_imag.to(kFloat64).contiguous();
  double worst = 0;
  for (int pos = 0; pos < 512; ++pos)
    for (int k = 0; k < 4; ++k) {
      const double a = pos * std::pow(10000.0, -2.0 * k / 8);
      worst = std::max(worst, std::abs(cr.data<double>()[pos * 4 + k] - std::cos(a)));
      worst = std::max(worst, std::abs(ci.data<double>()[pos * 4 + k] - std::sin(a)));
    }
  CHECK(worst < 1e-4);  // float32 angles up to 511 rad
}

TEST_CASE("llama2c: TransformerLM logits equal a float64 forward of the raw file", "[llama2c]") {
  require_files();
  const lm::Llama2cModel m = lm::read_llama2c_model(kModel);
  nn::TransformerLM lm(m.config);
  lm.load_state_dict(m.weights);
  const std::vector<int> ids = {1, 403, 407, 261, 378, 46, 300, 17, 511, 2, 3};
  const Reference ref(slurp(kModel));
  const auto want = ref.forward(ids);
  NoGradGuard no_grad;
  const Tensor logits =
      lm.forward(from_vector<int64_t>(std::vector<int64_t>(ids.begin(), ids.end()), {1, int64_t(ids.size())}))
          .to(kFloat64)
          .contiguous();
  REQUIRE(logits.shape() == Shape{1, int64_t(ids.size()), 512});
  double worst = 0, biggest = 0;
  for (size_t t = 0; t < ids.size(); ++t)
    for (int v = 0; v < 512; ++v) {
      worst = std::max(worst, std::abs(logits.data<double>()[t * 512 + v] - want[t][v]));
      biggest = std::max(biggest, std::abs(want[t][v]));
    }
  INFO("max |logit| " << biggest);
  CHECK(biggest > 1.0);
  CHECK(worst <= 1e-4);
}

TEST_CASE("llama2c: truncated, extended and corrupted model files are refused", "[llama2c]") {
  require_files();
  const std::string bytes = slurp(kModel);
  const std::string p = temp_path("model.bin");
  spit(p, bytes);
  for (size_t len = bytes.size() - 1; len > 0; len -= std::min<size_t>(len, 97)) {
    fs::resize_file(p, len);
    INFO("length " << len);
    REQUIRE_THROWS_AS(lm::read_llama2c_model(p), Error);
  }
  for (size_t len : {size_t(0), size_t(3), size_t(27), size_t(28), size_t(29)}) {
    spit(p, std::string_view(bytes).substr(0, len));
    INFO("length " << len);
    REQUIRE_THROWS_AS(lm::read_llama2c_model(p), Error);
  }
  spit(p, bytes + "x");
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("1 bytes after the last tensor"));
  spit(p, bytes.substr(0, bytes.size() - 4));
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("truncated: freq_cis_imag"));

  auto with_field = [&](int field, int32_t value) {
    std::string b = bytes;
    std::memcpy(b.data() + 4 * field, &value, 4);
    spit(p, b);
  };
  with_field(3, 0);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("n_heads (offset 12) is 0"));
  with_field(3, 7);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("does not divide dim"));
  with_field(4, 3);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("does not divide n_heads"));
  with_field(0, -64);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("dim (offset 0) is -64"));
  with_field(5, -512);  // a separate classifier the file does not hold
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("truncated: wcls"));
  with_field(2, 1 << 30);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("n_layers"));
  with_field(0, 0x616b3432);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("ak42"));

  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string b = bytes;
    const int n = 1 + int(rng() % 28);
    for (int i = 0; i < n; ++i) b[rng() % 28] = char(rng());
    if (b.compare(0, 28, bytes, 0, 28) == 0) continue;
    spit(p, b);
    INFO("trial " << trial);
    REQUIRE_THROWS_AS(lm::read_llama2c_model(p), Error);
  }
  fs::remove(p);
  REQUIRE_THROWS_AS(lm::read_llama2c_model(p), Error);  // missing
}

TEST_CASE("llama2c: the tokenizer encodes as run.c and decodes back", "[llama2c]") {
  require_files();
  const lm::Llama2cTokenizer tok(kTok, 512);
  CHECK(tok.piece(3) == "<0x00>");
  CHECK(tok.piece(258) == "<0xFF>");
  for (const RunCIds& c : kRunCIds) {
    INFO("prompt '" << c.prompt << "'");
    const auto ids = tok.encode(c.prompt);
    CHECK(ids == c.ids);
    std::string text;
    for (size_t i = 1; i < ids.size(); ++i) text += tok.decode(ids[i - 1], ids[i]);
    CHECK(text == c.prompt);  // the dummy-prefix space goes after BOS
  }
  CHECK(tok.decode(0, 3 + 'A') == "A");
  CHECK(tok.decode(0, 3 + 0xE6) == "\xe6");
  CHECK(tok.decode(1, 261) == "a");   // leading space stripped after BOS
  CHECK(tok.decode(5, 261) == " a");
  REQUIRE_THROWS_AS(tok.decode(1, 512), Error);

  const auto codec = lm::make_llama2c_codec(kTok, 512);
  CHECK(codec->kind() == "llama2c");
  CHECK(codec->vocab_size() == 512);
  CHECK(codec->stop_token() == std::optional<uint32_t>(1));  // run.c stops when it samples BOS
  CHECK(codec->encode_prompt("Once upon a time") == kRunCIds[0].ids);
}

TEST_CASE("llama2c: damaged tokenizer files are refused", "[llama2c]") {
  require_files();
  const std::string bytes = slurp(kTok);
  const std::string p = temp_path("tok.bin");
  for (size_t len = 0; len < bytes.size(); len += 7) {
    spit(p, std::string_view(bytes).substr(0, len));
    INFO("length " << len);
    REQUIRE_THROWS_AS(lm::Llama2cTokenizer(p, 512), Error);
  }
  spit(p, bytes + "x");
  REQUIRE_THROWS_WITH(lm::Llama2cTokenizer(p, 512), Catch::Contains("1 bytes remain"));
  REQUIRE_THROWS_AS(lm::Llama2cTokenizer(kTok, 511), Error);  // bytes left over
  REQUIRE_THROWS_AS(lm::Llama2cTokenizer(kTok, 513), Error);  // truncated
  REQUIRE_THROWS_AS(lm::Llama2cTokenizer(kTok, 100), Error);  // no room for the byte pieces
  std::string b = bytes;
  const int32_t huge = 1 << 30;
  std::memcpy(b.data() + 4 + 4, &huge, 4);  // token 0's length
  spit(p, b);
  REQUIRE_THROWS_WITH(lm::Llama2cTokenizer(p, 512), Catch::Contains("token 0 has length 1073741824 (offset 8)"));
  fs::remove(p);
}

// A tokenizer file written here (no shared data needed): run.c's layout, max_token_length then per
// token a float score, an int32 length and the bytes.
TEST_CASE("llama2c: a tokenizer without the \" \" piece or with a negative max_token_length is refused",
          "[llama2c]") {
  auto file = [](int32_t max_len, bool with_space) {
    std::string b(4, '\0');
    std::memcpy(b.data(), &max_len, 4);
    std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n"};
    for (int i = 0; i < 256; ++i) pieces.push_back(fmt::format("<0x{:02X}>", i));
    pieces.push_back(with_space ? " " : "ab");
    for (const std::string& piece : pieces) {
      const float score = 0.0f;
      const auto len = int32_t(piece.size());
      b.append(reinterpret_cast<const char*>(&score), 4);
      b.append(reinterpret_cast<const char*>(&len), 4);
      b += piece;
    }
    return b;
  };
  const std::string p = temp_path("tok_small.bin");
  spit(p, file(8, true));
  CHECK(lm::Llama2cTokenizer(p, 260).encode("a", false) == std::vector<uint32_t>{259, 3 + 'a'});
  spit(p, file(8, false));
  const lm::Llama2cTokenizer no_space(p, 260);
  CHECK_THROWS_WITH(no_space.encode("a"), Catch::Contains("has no piece \" \" (the dummy prefix)") &&
                                              Catch::Contains(p));
  CHECK(no_space.encode("") == std::vector<uint32_t>{lm::Llama2cTokenizer::kBos});  // no prefix needed
  spit(p, file(-1, true));
  CHECK_THROWS_WITH(lm::Llama2cTokenizer(p, 260), Catch::Contains("max_token_length (offset 0) is -1"));
  CHECK_THROWS_WITH(lm::Llama2cTokenizer(p, 258), Catch::Contains("vocabulary size 258 must be in [259, 2^22]"));
  fs::remove(p);
}

// ---- version 1 ("ak42") ----------------------------------------------------------------------------
// The tests write version-1 files themselves from stories260K.bin's arrays: the header and order of
// llama2.c's export.py version1_export (lm/llama2c.h), with the same float bits as the version-0 file.

namespace {

// The float arrays of a version-0 file by run.c's name, and its 7 header fields.
struct V0Arrays {
  int32_t h[7];
  std::map<std::string, std::vector<float>> a;
};

V0Arrays split_v0(const std::string& bytes) {
  V0Arrays v;
  std::memcpy(v.h, bytes.data(), sizeof v.h);
  const size_t C = size_t(v.h[0]), F = size_t(v.h[1]), L = size_t(v.h[2]), H = size_t(v.h[3]);
  const size_t KV = size_t(v.h[4]) * (C / H), V = size_t(std::abs(v.h[5])), T = size_t(v.h[6]), D = C / H;
  const std::vector<std::pair<std::string, size_t>> order = {
      {"token_embedding", V * C}, {"rms_att", L * C}, {"wq", L * C * C}, {"wk", L * KV * C}, {"wv", L * KV * C},
      {"wo", L * C * C}, {"rms_ffn", L * C}, {"w1", L * F * C}, {"w2", L * C * F}, {"w3", L * F * C},
      {"rms_final", C}, {"freq_cis_real", T * D / 2}, {"freq_cis_imag", T * D / 2}};
  size_t at = 28;
  for (const auto& [name, n] : order) {
    std::vector<float> f(n);
    REQUIRE(at + 4 * n <= bytes.size());
    std::memcpy(f.data(), bytes.data() + at, 4 * n);
    v.a[name] = std::move(f);
    at += 4 * n;
  }
  if (v.h[5] < 0) {
    std::vector<float> f(V * C);
    std::memcpy(f.data(), bytes.data() + at, 4 * f.size());
    v.a["wcls"] = std::move(f);
    at += 4 * f.size();
  }
  REQUIRE(at == bytes.size());
  return v;
}

void append(std::string& out, const std::vector<float>& f) {
  out.append(reinterpret_cast<const char*>(f.data()), 4 * f.size());
}

// A version-0 file of the arrays: vocab_size negative and wcls at the end when `a` holds one.
std::string write_v0(const V0Arrays& v) {
  int32_t h[7];
  std::memcpy(h, v.h, sizeof h);
  h[5] = v.a.count("wcls") ? -std::abs(h[5]) : std::abs(h[5]);
  std::string out(reinterpret_cast<const char*>(h), sizeof h);
  for (const char* name : {"token_embedding", "rms_att", "wq", "wk", "wv", "wo", "rms_ffn", "w1", "w2", "w3",
                           "rms_final", "freq_cis_real", "freq_cis_imag"})
    append(out, v.a.at(name));
  if (v.a.count("wcls")) append(out, v.a.at("wcls"));
  return out;
}

// A version-1 file of the arrays: the 256-byte header, the norms, the embedding, the matrices, [wcls].
std::string write_v1(const V0Arrays& v) {
  const bool shared = !v.a.count("wcls");
  std::string out(256, '\0');
  const uint32_t magic = 0x616b3432;
  const int32_t version = 1;
  int32_t h[7];
  std::memcpy(h, v.h, sizeof h);
  h[5] = std::abs(h[5]);
  std::memcpy(out.data(), &magic, 4);
  std::memcpy(out.data() + 4, &version, 4);
  std::memcpy(out.data() + 8, h, sizeof h);
  out[36] = shared ? 1 : 0;
  for (const char* name : {"rms_att", "rms_ffn", "rms_final", "token_embedding", "wq", "wk", "wv", "wo", "w1", "w2", "w3"})
    append(out, v.a.at(name));
  if (!shared) append(out, v.a.at("wcls"));
  return out;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), size_t(ca.numel()) * dtype_size(ca.dtype())) == 0;
}

// Both files give the same config and the same parameters bit for bit, hence the same logits.
void require_same_model(const lm::Llama2cModel& a, const lm::Llama2cModel& b) {
  REQUIRE(a.config.to_config_map() == b.config.to_config_map());
  REQUIRE(a.weights.size() == b.weights.size());
  for (const auto& [name, t] : a.weights) {
    INFO(name);
    REQUIRE(b.weights.count(name));
    CHECK(same_bits(t, b.weights.at(name)));
  }
  nn::TransformerLM la(a.config), lb(b.config);
  la.load_state_dict(a.weights);
  lb.load_state_dict(b.weights);
  NoGradGuard no_grad;
  const Tensor ids = from_vector<int64_t>({1, 403, 407, 261, 378, 46, 300, 17, 511, 2, 3}, {1, 11});
  CHECK(same_bits(la.forward(ids), lb.forward(ids)));
}

}  // namespace

TEST_CASE("llama2c: a version-1 file imports to the same parameters and logits as version 0", "[llama2c]") {
  require_files();
  V0Arrays arrays = split_v0(slurp(kModel));
  const std::string p0 = temp_path("v0.bin"), p1 = temp_path("v1.bin");

  // stories260K as it is (shared classifier).
  spit(p1, write_v1(arrays));
  const lm::Llama2cModel m0 = lm::read_llama2c_model(kModel), m1 = lm::read_llama2c_model(p1);
  CHECK(m0.version == 0);
  CHECK(m1.version == 1);
  CHECK(m1.config.tie_embeddings);
  CHECK_FALSE(m1.freq_cis_real.defined());  // version 1 stores no RoPE tables
  require_same_model(m0, m1);

  // A separate classifier (the embedding's floats reversed): the v0 and v1 untied layouts agree.
  std::vector<float> wcls = arrays.a.at("token_embedding");
  std::reverse(wcls.begin(), wcls.end());
  arrays.a["wcls"] = wcls;
  spit(p0, write_v0(arrays));
  spit(p1, write_v1(arrays));
  const lm::Llama2cModel u0 = lm::read_llama2c_model(p0), u1 = lm::read_llama2c_model(p1);
  CHECK_FALSE(u1.config.tie_embeddings);
  REQUIRE(u1.weights.count("lm_head.weight"));
  CHECK(same_bits(u1.weights.at("lm_head.weight"), from_vector<float>(wcls, {512, 64})));
  require_same_model(u0, u1);
  fs::remove(p0);
  fs::remove(p1);
}

TEST_CASE("llama2c: truncated, extended and corrupted version-1 files are refused", "[llama2c]") {
  require_files();
  const std::string bytes = write_v1(split_v0(slurp(kModel)));
  const std::string p = temp_path("v1_bad.bin");
  spit(p, bytes);
  REQUIRE_NOTHROW(lm::read_llama2c_model(p));
  for (size_t len = bytes.size() - 1; len > 0; len -= std::min<size_t>(len, 97)) {
    fs::resize_file(p, len);
    INFO("length " << len);
    REQUIRE_THROWS_AS(lm::read_llama2c_model(p), Error);
  }
  for (size_t len : {size_t(4), size_t(8), size_t(36), size_t(37), size_t(255), size_t(256), size_t(257)}) {
    spit(p, std::string_view(bytes).substr(0, len));
    INFO("length " << len);
    REQUIRE_THROWS_AS(lm::read_llama2c_model(p), Error);
  }
  spit(p, std::string_view(bytes).substr(0, 100));
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains(p) && Catch::Contains("shorter than the 256-byte"));
  spit(p, bytes + "x");
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("1 bytes after the last tensor"));
  spit(p, bytes.substr(0, bytes.size() - 4));
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("truncated: w3"));

  auto with_int = [&](size_t offset, int32_t value) {
    std::string b = bytes;
    std::memcpy(b.data() + offset, &value, 4);
    spit(p, b);
  };
  auto with_byte = [&](size_t offset, unsigned char value) {
    std::string b = bytes;
    b[offset] = char(value);
    spit(p, b);
  };
  with_int(4, 0);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains(p) && Catch::Contains("ak42") && Catch::Contains("version 0 (offset 4)"));
  with_int(4, 3);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("version 3 (offset 4)"));
  with_int(4, -1);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("version -1 (offset 4)"));
  with_int(4, 2);  // read as version 2: the padding byte at offset 37 is then the group size
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("group_size (offset 37) is 0: must be positive"));
  with_byte(36, 2);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("shared_classifier (offset 36) is 2: must be 0 or 1"));
  with_byte(36, 255);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("shared_classifier (offset 36) is 255"));
  with_byte(36, 0);  // a separate classifier the file does not hold
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("truncated: wcls"));
  with_byte(37, 1);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("padding byte at offset 37 is 0x01"));
  with_byte(255, 0x80);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("offset 255"));
  with_int(8 + 4 * 5, -512);  // version 1 has no negative vocab_size
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("vocab_size (offset 28) is -512"));
  with_int(8 + 4 * 3, 0);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("n_heads (offset 20) is 0"));
  with_int(8 + 4 * 3, 7);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("n_heads 7 (offset 20) does not divide dim"));
  with_int(8 + 4 * 4, 3);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("n_kv_heads 3 (offset 24) does not divide n_heads"));
  with_int(8, -64);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("dim (offset 8) is -64"));
  with_int(8 + 4 * 2, 1 << 30);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("n_layers (offset 16)"));
  with_int(8 + 4 * 6, 0);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("seq_len (offset 32) is 0"));

  // Random header bytes: refused, except that seq_len (offset 32) sizes no array in version 1 (there are
  // no RoPE tables), so a change confined to it that stays in range loads with that context length.
  std::mt19937 rng(11);
  int refused = 0, loaded = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string b = bytes;
    const int n = 1 + int(rng() % 8);
    for (int i = 0; i < n; ++i) b[rng() % 256] = char(rng());
    if (b.compare(0, 256, bytes, 0, 256) == 0) continue;
    spit(p, b);
    INFO("trial " << trial);
    try {
      const lm::Llama2cModel m = lm::read_llama2c_model(p);
      int32_t seq;
      std::memcpy(&seq, b.data() + 32, 4);
      std::string only_seq = b;
      std::memcpy(only_seq.data() + 32, bytes.data() + 32, 4);
      CHECK(only_seq.compare(0, 256, bytes, 0, 256) == 0);
      CHECK(m.config.context_length == seq);
      ++loaded;
    } catch (const Error&) {
      ++refused;
    }
  }
  INFO("refused " << refused << ", loaded " << loaded);
  CHECK(refused > 300);
  fs::remove(p);
}

TEST_CASE("llama2c: tapegrad import llama2c reads a version-1 file and generates as from version 0", "[llama2c][tool]") {
  require_files();
  using namespace tapegrad::testing;
  const std::string root = temp_path("tool");
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string v1 = root + "/stories260K_v1.bin";
  spit(v1, write_v1(split_v0(slurp(kModel))));
  std::string text[2];
  for (int version : {0, 1}) {
    const std::string out = root + "/imported" + std::to_string(version);
    ToolResult r = run_tool({"import", "llama2c", version == 0 ? kModel : v1, kTok, "--out", out}, out + "_import");
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("llama2.c version " + std::to_string(version)));
    r = run_tool({"generate", "--checkpoint", out + "/checkpoints/step_00000000.safetensors", "--prompt",
                  "Once upon a time", "--greedy", "--max-tokens", "40"},
                 out + "_generate");
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    text[version] = r.out;
  }
  CHECK(text[0].size() > 40);
  CHECK(text[0] == text[1]);
  fs::remove_all(root);
}

// ---- export, and version 2 (int8 Q8_0) --------------------------------------------------------------
// Files written by lm::export_llama2c (and `tapegrad export llama2c`), read back by read_llama2c_model.

namespace {

bool same_int8(const kernels::Int8Matrix& a, const kernels::Int8Matrix& b) {
  return a.rows == b.rows && a.cols == b.cols && a.group == b.group && a.q == b.q && a.scales.size() == b.scales.size() &&
         std::memcmp(a.scales.data(), b.scales.data(), 4 * a.scales.size()) == 0;
}

kernels::Int8Matrix quantize(const Tensor& w, int64_t group) {
  const Tensor c = w.to(kFloat32).contiguous();
  return kernels::quantize_int8(c.data<float>(), c.size(0), c.size(1), group);
}

// The float parameters of a file equal the model's, bit for bit (and the file holds no int8).
void require_float_weights(const lm::Llama2cModel& m, const std::map<std::string, Tensor>& want) {
  REQUIRE(m.int8_weights.empty());
  REQUIRE(m.weights.size() == want.size());
  for (const auto& [name, t] : want) {
    INFO(name);
    REQUIRE(m.weights.count(name));
    CHECK(same_bits(m.weights.at(name), t));
  }
}

// A small random model (no shared data needed): GQA, d_ff 24 (so the default group is 8).
std::unique_ptr<nn::TransformerLM> tiny_model(bool tied, double rope_theta = 10000.0, double eps = 1e-5) {
  nn::TransformerLMConfig c;
  c.vocab_size = 16;
  c.context_length = 8;
  c.d_model = 8;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.d_ff = 24;
  c.tie_embeddings = tied;
  c.rope_theta = rope_theta;
  c.eps = eps;
  Generator gen(5);
  return std::make_unique<nn::TransformerLM>(c, &gen);
}

const std::string kPrompt = "Once upon a time";

}  // namespace

TEST_CASE("llama2c: export of a small model reads back for versions 0, 1 and 2, float and int8", "[llama2c]") {
  const std::string p = temp_path("tiny_export.bin");
  for (const bool tied : {true, false}) {
    INFO("tied " << tied);
    const auto model = tiny_model(tied);
    const auto state = model->state_dict();
    for (int version : {0, 1}) {
      INFO("version " << version);
      const lm::Llama2cExport e = lm::export_llama2c(*model, p, {.version = version});
      CHECK(e.bytes == fs::file_size(p));
      const lm::Llama2cModel m = lm::read_llama2c_model(p);
      CHECK(m.version == version);
      CHECK(m.config.to_config_map() == model->config.to_config_map());
      require_float_weights(m, state);
    }
    // Version 2 of the float model: the default group 8 (64, 32 and 16 do not divide d_ff 24).
    const lm::Llama2cExport e = lm::export_llama2c(*model, p, {.version = 2});
    CHECK(e.group == 8);
    CHECK(e.int8_quantized == 7 * 2 + (tied ? 1 : 2));
    CHECK(e.int8_kept == 0);
    const lm::Llama2cModel m = lm::read_llama2c_model(p);
    CHECK(m.version == 2);
    CHECK(m.group_size == 8);
    CHECK(m.int8_weights.size() == size_t(e.int8_quantized));
    CHECK(m.weights.size() == 2 * 2 + 1);  // the norms stay float
    for (const auto& [name, t] : state) {
      INFO(name);
      if (t.dim() == 2) CHECK(same_int8(m.int8_weights.at(name), quantize(t, 8)));
      else CHECK(same_bits(m.weights.at(name), t));
    }

    // An int8 model whose embeddings (and lm_head) stayed float: its own int8 matrices unchanged, the
    // float ones quantized with its group size.
    auto q = tiny_model(tied);
    q->quantize_int8(4, /*keep_embeddings_float=*/true);
    const lm::Llama2cExport e4 = lm::export_llama2c(*q, p, {.version = 2});
    CHECK(e4.group == 4);
    CHECK(e4.int8_kept == 7 * 2);
    CHECK(e4.int8_quantized == (tied ? 1 : 2));
    const lm::Llama2cModel m4 = lm::read_llama2c_model(p);
    for (const auto& [prefix, linear] : q->named_linears()) {
      INFO(prefix);
      if (linear->int8_weight) CHECK(same_int8(m4.int8_weights.at(prefix + ".weight"), *linear->int8_weight));
      else CHECK(same_int8(m4.int8_weights.at(prefix + ".weight"), quantize(linear->weight, 4)));
    }
    CHECK(same_int8(m4.int8_weights.at("token_embeddings.weight"), quantize(q->token_embeddings->weight, 4)));
    // Version 1 of it: the int8 matrices dequantized.
    const lm::Llama2cExport e1 = lm::export_llama2c(*q, p, {.version = 1});
    CHECK(e1.dequantized);
    const lm::Llama2cModel m1 = lm::read_llama2c_model(p);
    const kernels::Int8Matrix& wq = *q->blocks[1]->attn->q_proj->int8_weight;
    std::vector<float> deq(wq.q.size());
    kernels::dequantize_int8(wq, deq.data());
    CHECK(same_bits(m1.weights.at("layers.1.attn.q_proj.weight"), from_vector<float>(deq, {8, 8})));
  }
  fs::remove(p);
}

TEST_CASE("llama2c: exports llama2.c cannot express are refused, nothing written", "[llama2c]") {
  const std::string p = temp_path("refused.bin");
  fs::remove(p);
  auto refused = [&](const nn::TransformerLM& model, lm::Llama2cExportOptions o, const std::string& what) {
    INFO(what);
    CHECK_THROWS_WITH(lm::export_llama2c(model, p, o), Catch::Contains(what));
    CHECK_FALSE(fs::exists(p));
    CHECK_FALSE(fs::exists(p + ".tmp"));
  };
  refused(*tiny_model(true, 500000.0), {.version = 0}, "rope_theta is 500000");
  refused(*tiny_model(true, 10000.0, 1e-6), {.version = 1}, "eps is 1e-06");
  const auto model = tiny_model(false);
  refused(*model, {.version = 3}, "version 3");
  refused(*model, {.version = 1, .group = 8}, "applies to version 2");
  refused(*model, {.version = 2, .group = 3}, "group size 3 does not divide dim 8, the row length of token_embeddings.weight");
  refused(*model, {.version = 2, .group = 16},
          "group size 16 does not divide dim 8");
  auto q = tiny_model(false);
  q->quantize_int8(16);  // groups of 16 along rows of 8 and of 24: shorter last groups
  refused(*q, {.version = 2}, "group size 16 does not divide dim 8");
  q = tiny_model(false);
  q->quantize_int8(4);
  refused(*q, {.version = 2, .group = 8}, "would quantize twice");
  // A directory that does not exist: an error naming the file, nothing left behind.
  CHECK_THROWS_WITH(lm::export_llama2c(*model, temp_path("no_such_dir") + "/m.bin", {.version = 0}),
                    Catch::Contains("cannot write"));
}

TEST_CASE("llama2c: stories260K exported as versions 0 and 1 reads back bit for bit", "[llama2c]") {
  require_files();
  const lm::Llama2cModel orig = lm::read_llama2c_model(kModel);
  const auto model = lm::make_llama2c_model(orig);
  const std::string p = temp_path("export01.bin");
  for (int version : {0, 1}) {
    INFO("version " << version);
    lm::export_llama2c(*model, p, {.version = version});
    const lm::Llama2cModel m = lm::read_llama2c_model(p);
    CHECK(m.version == version);
    CHECK(m.config.to_config_map() == orig.config.to_config_map());
    require_float_weights(m, orig.weights);
    if (version == 0) {
      // The header and every weight are stories260K.bin's bytes; only the RoPE tables (run.c does not read
      // them) may differ in the last bit (torch's float32 cos/sin against ours).
      const std::string ours = slurp(p), theirs = slurp(kModel);
      const size_t tables = 2 * 4 * 512 * 4;
      REQUIRE(ours.size() == theirs.size());
      CHECK(ours.compare(0, ours.size() - tables, theirs, 0, theirs.size() - tables) == 0);
      // The RoPE tables as model.py computes them: float32 cos/sin of pos · 10000^(−2k/D).
      const Tensor a = m.freq_cis_real, b = orig.freq_cis_real, c = m.freq_cis_imag, d = orig.freq_cis_imag;
      double worst = 0;
      for (int64_t i = 0; i < a.numel(); ++i) {
        worst = std::max(worst, double(std::abs(a.data<float>()[i] - b.data<float>()[i])));
        worst = std::max(worst, double(std::abs(c.data<float>()[i] - d.data<float>()[i])));
      }
      CHECK(worst < 1e-4);
    }
  }
  fs::remove(p);
}

TEST_CASE("llama2c: version 2 of stories260K holds quantize_int8's values and re-exports bit for bit", "[llama2c]") {
  require_files();
  const lm::Llama2cModel orig = lm::read_llama2c_model(kModel);
  const auto model = lm::make_llama2c_model(orig);
  const std::string p2 = temp_path("v2_g4.bin"), p2b = temp_path("v2_again.bin"), p2c = temp_path("v2_default.bin");
  const lm::Llama2cExport e = lm::export_llama2c(*model, p2, {.version = 2, .group = 4});
  CHECK(e.group == 4);
  CHECK(e.int8_quantized == 1 + 7 * 5);

  const lm::Llama2cModel m = lm::read_llama2c_model(p2);
  CHECK(m.version == 2);
  CHECK(m.group_size == 4);
  CHECK(m.config.to_config_map() == orig.config.to_config_map());
  REQUIRE(m.int8_weights.size() == 1 + 7 * 5);  // shared classifier: no wcls
  REQUIRE(m.weights.size() == 2 * 5 + 1);
  for (const auto& [name, t] : orig.weights) {
    INFO(name);
    if (t.dim() == 2) CHECK(same_int8(m.int8_weights.at(name), quantize(t, 4)));
    else CHECK(same_bits(m.weights.at(name), t));
  }
  // Without --group: 64 does not divide hidden_dim 172, the largest power of two that does is 4.
  const lm::Llama2cExport ec = lm::export_llama2c(*model, p2c, {.version = 2});
  CHECK(ec.group == 4);
  CHECK_THAT(ec.group_reason, Catch::Contains("largest power of two"));
  CHECK(slurp(p2c) == slurp(p2));

  // The int8 model of that file writes the same bytes: its values and scales unchanged.
  const auto q = lm::make_llama2c_model(m);
  CHECK(q->is_int8());
  const lm::Llama2cExport eb = lm::export_llama2c(*q, p2b, {.version = 2});
  CHECK(eb.group == 4);
  CHECK(eb.int8_kept == 1 + 7 * 5);
  CHECK(eb.int8_quantized == 0);
  CHECK(slurp(p2b) == slurp(p2));

  // The int8 model runs: its logits stay near the float model's.
  NoGradGuard no_grad;
  const Tensor ids = from_vector<int64_t>({1, 403, 407, 261, 378, 46, 300, 17}, {1, 8});
  const Tensor a = model->forward(ids).contiguous(), b = q->forward(ids).contiguous();
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, double(std::abs(a.data<float>()[i] - b.data<float>()[i])));
  INFO("max |logit difference| " << worst);
  CHECK(worst < 0.5);
  for (const auto& f : {p2, p2b, p2c}) fs::remove(f);
}

TEST_CASE("llama2c: truncated and corrupted version-2 files are refused with one clear error", "[llama2c]") {
  require_files();
  const std::string p = temp_path("v2_bad.bin");
  lm::export_llama2c(*lm::make_llama2c_model(lm::read_llama2c_model(kModel)), p, {.version = 2, .group = 4});
  const std::string bytes = slurp(p);
  // 256-byte header, float32 norms (2 · 5 · 64 + 64), then token_embedding's 512 · 64 values and their scales.
  const size_t values = 256 + 4 * (2 * 5 * 64 + 64), scales = values + 512 * 64;
  REQUIRE(bytes.size() == scales + 4 * (512 * 64 / 4) + 5 * (2 * (64 * 64 + 4 * 64 * 64 / 4) + 2 * (32 * 64 + 4 * 32 * 64 / 4) +
                                                             3 * (172 * 64 + 4 * 172 * 64 / 4)));
  for (size_t len = bytes.size() - 1; len > 0; len -= std::min<size_t>(len, 997)) {
    fs::resize_file(p, len);
    INFO("length " << len);
    REQUIRE_THROWS_AS(lm::read_llama2c_model(p), Error);
  }
  spit(p, bytes.substr(0, bytes.size() - 1));
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains(p) && Catch::Contains("truncated: w3"));
  spit(p, bytes + "x");
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("1 bytes after the last tensor"));

  auto with = [&](size_t offset, auto value) {
    std::string b = bytes;
    std::memcpy(b.data() + offset, &value, sizeof value);
    spit(p, b);
  };
  with(37, int32_t(0));
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("group_size (offset 37) is 0: must be positive"));
  with(37, int32_t(-4));
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("group_size (offset 37) is -4"));
  with(37, int32_t(3));
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p),
                      Catch::Contains("group_size (offset 37) is 3, which does not divide dim 64, the row length of "
                                      "token_embedding [512, 64]"));
  with(37, int32_t(32));  // divides dim, not hidden_dim
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("does not divide hidden_dim 172, the row length of w2"));
  with(41, uint8_t(1));
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("padding byte at offset 41 is 0x01"));
  with(values + 5, int8_t(-128));
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains(p) && Catch::Contains("token_embedding has the int8 value -128 at offset " +
                                                                   std::to_string(values + 5) + " (row 0, column 5)"));
  with(scales + 4 * 17, std::nanf(""));
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("token_embedding has the scale nan at offset " +
                                                                 std::to_string(scales + 4 * 17) + " (row 1, group 1)"));
  with(scales, -1.0f);
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("scale -1 at offset " + std::to_string(scales)));
  with(scales, std::numeric_limits<float>::infinity());
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("scale inf"));
  with(bytes.size() - 4, std::nanf(""));  // the last scale of w3 of the last layer
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("w3 of layer 4 has the scale nan"));
  with(size_t(36), uint8_t(0));  // a separate classifier the file does not hold
  REQUIRE_THROWS_WITH(lm::read_llama2c_model(p), Catch::Contains("truncated: wcls"));
  fs::remove(p);
}

TEST_CASE("llama2c: tapegrad export llama2c and import of version 2 through the tool", "[llama2c][tool]") {
  require_files();
  using namespace tapegrad::testing;
  const std::string root = temp_path("export_tool");
  fs::remove_all(root);
  fs::create_directories(root);
  auto tool = [&](const std::vector<std::string>& args, const std::string& log) {
    ToolResult r = run_tool(args, root + "/" + log);
    INFO("tapegrad " << log << ":\n" << r.out << r.err);
    return r;
  };
  ToolResult r = tool({"import", "llama2c", kModel, kTok, "--out", root + "/float"}, "import");
  REQUIRE(r.exit_code == 0);
  const std::string ckpt = root + "/float/checkpoints/step_00000000.safetensors";

  r = tool({"export", "llama2c", ckpt, "--out", root + "/v0.bin"}, "export0");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("version 0: float32"));
  require_float_weights(lm::read_llama2c_model(root + "/v0.bin"), lm::read_llama2c_model(kModel).weights);
  r = tool({"export", "llama2c", ckpt, "--out", root + "/v2.bin", "--version", "2"}, "export2");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("int8 Q8_0 in groups of 4") && Catch::Contains("largest power of two"));

  // Refused, one line, nothing written: a group that does not divide hidden_dim; --group for version 1.
  for (const auto& [args, what] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--version", "2", "--group", "32"},
            "group size 32 does not divide hidden_dim 172, the row length of layers.0.ffn.w2.weight [64, 172]"},
           {{"--version", "1", "--group", "4"}, "--group is for --version 2"},
           {{"--version", "5"}, "--version 5: must be 0, 1 or 2"}}) {
    std::vector<std::string> full = {"export", "llama2c", ckpt, "--out", root + "/refused.bin"};
    full.insert(full.end(), args.begin(), args.end());
    r = tool(full, "refused");
    CHECK(r.exit_code != 0);
    CHECK(r.signal == 0);
    const auto lines = lines_of(r.err);
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Catch::StartsWith("tapegrad: ") && Catch::Contains(what));
    CHECK_FALSE(fs::exists(root + "/refused.bin"));
    CHECK_FALSE(fs::exists(root + "/refused.bin.tmp"));
  }

  // import of the version-2 file: an int8 model that generates, and exports back to the same bytes.
  r = tool({"import", "llama2c", root + "/v2.bin", kTok, "--out", root + "/int8"}, "import2");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("llama2.c version 2") && Catch::Contains("int8 Q8_0 in groups of 4"));
  const std::string int8 = root + "/int8/checkpoints/step_00000000.safetensors";
  r = tool({"generate", "--checkpoint", int8, "--prompt", kPrompt, "--greedy", "--max-tokens", "40"}, "generate2");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith(kPrompt));
  CHECK(r.out.size() > kPrompt.size() + 40);
  r = tool({"export", "llama2c", int8, "--out", root + "/v2_again.bin", "--version", "2"}, "export2b");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("36 int8 matrices written unchanged, 0 quantized here"));
  CHECK(slurp(root + "/v2_again.bin") == slurp(root + "/v2.bin"));
  r = tool({"export", "llama2c", int8, "--out", root + "/v2_g8.bin", "--version", "2", "--group", "8"}, "export2c");
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("would quantize twice"));
  CHECK_FALSE(fs::exists(root + "/v2_g8.bin"));
  r = tool({"export", "llama2c", int8, "--out", root + "/v1_deq.bin", "--version", "1"}, "export1");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("dequantized from the int8 model's groups of 4"));
  CHECK(lm::read_llama2c_model(root + "/v1_deq.bin").version == 1);
  fs::remove_all(root);
}

// llama2.c's own programs on our exports: run.c reads version 0, runq.c version 2 (both built here with gcc
// from ../shared/bench/peers/llama2c; skipped without them). run.c gives the same text for
// our version-0 export as for stories260K.bin itself, and that is what `tapegrad generate --greedy` prints;
// runq.c runs our version-2 export and prints a story that starts with the prompt.
TEST_CASE("llama2c: run.c and runq.c run our version-0 and version-2 exports", "[llama2c][tool]") {
  require_files();
  using namespace tapegrad::testing;
  testing::shared_path("bench/peers/llama2c/runq.c");
  const std::string peers = testing::shared_path("bench/peers/llama2c") + "/";
  REQUIRE(std::system("gcc --version > /dev/null 2>&1") == 0);  // build-essential: a dependency
  const std::string root = temp_path("runq");
  fs::remove_all(root);
  fs::create_directories(root);
  for (const char* exe : {"run", "runq"}) {
    const std::string cmd = fmt::format("gcc -O2 -o '{}/{}' '{}{}.c' -lm > '{}/{}.gcc' 2>&1", root, exe, peers, exe, root, exe);
    INFO(cmd);
    REQUIRE(std::system(cmd.c_str()) == 0);
  }
  // run.c / runq.c: -n 60 positions, the prompt's 5 ids included, so 56 sampled tokens.
  auto llama2c = [&](const char* exe, const std::string& model) {
    const std::string out = root + "/" + exe + "_" + fs::path(model).filename().string() + ".out";
    const std::string cmd = fmt::format("'{}/{}' '{}' -z '{}' -t 0 -n 60 -i '{}' > '{}' 2> '{}.err'", root, exe, model,
                                        kTok, kPrompt, out, out);
    INFO(cmd);
    CHECK(std::system(cmd.c_str()) == 0);
    return slurp(out);
  };
  auto tool = [&](const std::vector<std::string>& args, const std::string& log) {
    ToolResult r = run_tool(args, root + "/" + log);
    INFO("tapegrad " << log << ":\n" << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return r.out;
  };
  tool({"import", "llama2c", kModel, kTok, "--out", root + "/float"}, "import");
  const std::string ckpt = root + "/float/checkpoints/step_00000000.safetensors";
  tool({"export", "llama2c", ckpt, "--out", root + "/model_v0.bin", "--version", "0"}, "export0");
  tool({"export", "llama2c", ckpt, "--out", root + "/model_v2.bin", "--version", "2"}, "export2");

  const std::string original = llama2c("run", kModel);
  CHECK_THAT(original, Catch::StartsWith(kPrompt));
  CHECK(llama2c("run", root + "/model_v0.bin") == original);
  const std::string ours =
      tool({"generate", "--checkpoint", ckpt, "--prompt", kPrompt, "--greedy", "--max-tokens", "56", "--threads", "1"},
           "generate");
  CHECK(ours == original);

  const std::string q8 = llama2c("runq", root + "/model_v2.bin");
  INFO("runq.c: " << q8);
  CHECK_THAT(q8, Catch::StartsWith(kPrompt));
  CHECK(q8.size() > kPrompt.size() + 40);
  // Our int8 model of the same file: runq.c quantizes activations as we do by default, but rounds halves away
  // from zero and sums in another order, so a greedy choice between near-equal logits may differ.
  tool({"import", "llama2c", root + "/model_v2.bin", kTok, "--out", root + "/int8"}, "import2");
  const std::string ours_q8 = tool({"generate", "--checkpoint", root + "/int8/checkpoints/step_00000000.safetensors",
                                    "--prompt", kPrompt, "--greedy", "--max-tokens", "56", "--threads", "1"},
                                   "generate2");
  if (ours_q8 != q8) WARN("tapegrad's int8 text differs from runq.c's:\n" << ours_q8 << "\nrunq.c:\n" << q8);
  fs::remove_all(root);
}
