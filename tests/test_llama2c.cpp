// test_llama2c.cpp — llama2.c models and tokenizers (lm/llama2c.h, lm/llama2c_tokenizer.h) on the real
// stories260K.bin / tok512.bin in ../shared/data/llama2c (skipped with a warning when absent):
//   * the logits of our float32 TransformerLM agree (≤ 1e-4 absolute) with a plain float64 forward written
//     here straight from the file's arrays, as run.c computes it; the stored RoPE tables are our convention;
//   * truncated, extended and corrupted files are refused with tapegrad::Error, never read out of bounds;
//   * encode gives run.c's ids, decode round-trips; damaged tokenizer files are refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

#include "autograd/tapegrad.h"
#include "lm/llama2c.h"
#include "lm/llama2c_tokenizer.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

const std::string kDir = std::string(TAPEGRAD_SHARED_DIR) + "/data/llama2c/";
const std::string kModel = kDir + "stories260K.bin";
const std::string kTok = kDir + "tok512.bin";

bool have_files() {
  if (fs::exists(kModel) && fs::exists(kTok)) return true;
  WARN("SKIPPED: " << kDir << " holds no stories260K.bin / tok512.bin");
  return false;
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
  if (!have_files()) return;
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
  if (!have_files()) return;
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
  if (!have_files()) return;
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
  if (!have_files()) return;
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
  if (!have_files()) return;
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
