// test_nn_classic.cpp — the classic (encoder-decoder) Transformer modules: LayerNorm, Dropout, GELU,
// FeedForward, sinusoidal and learned positions, MultiHeadAttention with key-padding and causal
// masks and cross-attention, the encoder/decoder layers and EncoderDecoder. Each is checked against
// naive float64 loops written here (not through the module), by float64 finite differences, and
// for its errors on bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <vector>

#include "autograd/tapegrad.h"
#include "nn/dropout.h"
#include "nn/encoder_decoder.h"
#include "nn/feedforward.h"
#include "nn/layernorm.h"
#include "nn/learned_positional.h"
#include "nn/multihead_attention.h"
#include "nn/sinusoidal_positional.h"
#include "tests/nn_test_helpers.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {

using Vec = std::vector<double>;

Tensor rnd64(const Shape& s, uint64_t seed, bool grad = true) {
  Generator g(seed);
  return randn(s, Options(kFloat64).requires_grad(grad), &g);
}

using testing::require_gradcheck;
using testing::with_params;
Tensor project(const Tensor& y) { return testing::project(y, 11); }

// Every parameter of m set to N(0, scale²) values (so biases and LayerNorm weights are not 0 / 1).
void randomize(Module& m, uint64_t seed, double scale = 0.5) {
  NoGradGuard ng;
  Generator g(seed);
  for (auto& p : m.parameters()) p.copy_(randn(p.shape(), Options(kFloat64), &g) * scale);
}

double max_abs_diff(const Vec& a, const Vec& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// y [N, out] = x [N, in] Wᵀ + b (b may be empty).
Vec naive_linear(const Vec& x, int64_t n, int64_t in, const Vec& w, const Vec& b, int64_t out) {
  Vec y(static_cast<size_t>(n * out));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[o];
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
  return y;
}

Vec vec(const Tensor& t) { return t.defined() ? t.to_vector<double>() : Vec{}; }

// Multi-head attention by loops. mask: [B, Tk] (1 = real key) or empty. A query with no visible
// key gives a zero head output (the module's documented convention).
Vec naive_mha(const MultiHeadAttention& m, const Vec& query, const Vec& kv, int64_t B, int64_t Tq, int64_t Tk,
              const Vec& mask, bool causal) {
  const int64_t C = m.d_model, H = m.n_heads, D = m.head_dim;
  Vec q = naive_linear(query, B * Tq, C, vec(m.q_proj->weight), vec(m.q_proj->bias), C);
  Vec k = naive_linear(kv, B * Tk, C, vec(m.k_proj->weight), vec(m.k_proj->bias), C);
  Vec v = naive_linear(kv, B * Tk, C, vec(m.v_proj->weight), vec(m.v_proj->bias), C);
  Vec heads(static_cast<size_t>(B * Tq * C), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Tq; ++i) {
        Vec s(static_cast<size_t>(Tk));
        std::vector<bool> vis(static_cast<size_t>(Tk));
        double mx = -1e300;
        bool any = false;
        for (int64_t j = 0; j < Tk; ++j) {
          vis[j] = (mask.empty() || mask[b * Tk + j] != 0.0) && (!causal || j <= i);
          if (!vis[j]) continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[(b * Tq + i) * C + h * D + d] * k[(b * Tk + j) * C + h * D + d];
          s[j] = dot / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, s[j]);
          any = true;
        }
        if (!any) continue;  // zeros
        double z = 0;
        for (int64_t j = 0; j < Tk; ++j) z += vis[j] ? std::exp(s[j] - mx) : 0.0;
        for (int64_t j = 0; j < Tk; ++j) {
          if (!vis[j]) continue;
          const double p = std::exp(s[j] - mx) / z;
          for (int64_t d = 0; d < D; ++d) heads[(b * Tq + i) * C + h * D + d] += p * v[(b * Tk + j) * C + h * D + d];
        }
      }
  return naive_linear(heads, B * Tq, C, vec(m.output_proj->weight), vec(m.output_proj->bias), C);
}

Tensor bool_mask(const Vec& bits, const Shape& s) { return tensor(bits, s, Options(kBool)); }

}  // namespace

// ---------------------------------------------------------------- LayerNorm

TEST_CASE("LayerNorm matches a float64 loop and gradchecks", "[nn][classic][gradcheck]") {
  const int64_t R = 6, C = 5;
  LayerNorm ln(C, 1e-5, true, kFloat64);
  CHECK(ln.weight.to_vector<double>() == Vec(C, 1.0));
  CHECK(ln.bias.to_vector<double>() == Vec(C, 0.0));
  CHECK(ln.named_parameters()[1].first == "bias");
  randomize(ln, 3);
  Tensor x = rnd64({2, 3, C}, 1) * 3.0 + 2.0;  // offset and scale: the mean matters
  Vec xv = vec(x), w = vec(ln.weight), b = vec(ln.bias), want(static_cast<size_t>(R * C));
  for (int64_t r = 0; r < R; ++r) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mu += xv[r * C + c] / C;
    for (int64_t c = 0; c < C; ++c) var += (xv[r * C + c] - mu) * (xv[r * C + c] - mu) / C;
    for (int64_t c = 0; c < C; ++c) want[r * C + c] = (xv[r * C + c] - mu) / std::sqrt(var + 1e-5) * w[c] + b[c];
  }
  Tensor y = ln(x);
  CHECK(y.shape() == x.shape());
  CHECK(max_abs_diff(vec(y), want) < 1e-12);

  // float32 input: statistics in float32 (sums accumulate in double), close to the float64 result.
  LayerNorm ln32(C);
  randomize(ln32, 3);
  CHECK(max_abs_diff(vec(ln32(x.detach().to(kFloat32))), want) < 1e-5);

  // Without the affine part: zero mean, unit (biased) variance per row.
  LayerNorm plain(C, 1e-12, /*elementwise_affine=*/false, kFloat64);
  CHECK(plain.parameters().empty());
  Vec p = vec(plain(x));
  for (int64_t r = 0; r < R; ++r) {
    double mu = 0, ms = 0;
    for (int64_t c = 0; c < C; ++c) mu += p[r * C + c] / C, ms += p[r * C + c] * p[r * C + c] / C;
    CHECK(std::abs(mu) < 1e-12);
    CHECK(std::abs(ms - 1.0) < 1e-9);
  }

  require_gradcheck([&](const std::vector<Tensor>& in) { return project(ln(in[0])); }, with_params({x.detach().requires_grad_()}, ln));
  require_gradcheck([&](const std::vector<Tensor>& in) { return project(plain(in[0])); }, {rnd64({3, C}, 5)});
  CHECK_THROWS_AS(ln(rnd64({2, 4}, 1)), Error);
  CHECK_THROWS_AS(LayerNorm(0), Error);
}

// ---------------------------------------------------------------- GELU

TEST_CASE("gelu is x times Phi(x) in the erf form with derivative Phi plus x phi", "[nn][classic]") {
  const Vec xs{-6.0, -3.0, -1.0, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.0, 2.0, 3.0, 6.0};
  Tensor x = tensor(xs, Options(kFloat64).requires_grad());
  Tensor y = gelu(x);
  y.sum().backward();
  Vec yv = vec(y), gv = vec(x.grad());
  Tensor y32 = gelu(x.detach().to(kFloat32));
  Vec y32v = vec(y32);
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i], cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
    const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2.0 * std::numbers::pi);
    CHECK(yv[i] == Approx(v * cdf).margin(1e-15));
    CHECK(gv[i] == Approx(cdf + v * pdf).margin(1e-15));
    CHECK(y32v[i] == Approx(v * cdf).margin(1e-6));
  }
  // Not the tanh approximation: at x = 1 the two differ by ~1.6e-4.
  CHECK(yv[8] == Approx(0.8413447460685429).epsilon(1e-14));
}

// ---------------------------------------------------------------- FeedForward

TEST_CASE("FeedForward with ReLU and GELU matches loops and gradchecks", "[nn][classic][gradcheck]") {
  for (Activation act : {Activation::Relu, Activation::Gelu}) {
    DYNAMIC_SECTION(activation_name(act)) {
      const int64_t C = 4, F = 6, N = 6;
      Generator g(7);
      FeedForward ff(C, F, act, /*bias=*/true, kFloat64, &g);
      auto names = ff.named_parameters();
      REQUIRE(names.size() == 4);
      CHECK(names[0].first == "w1.weight");
      CHECK(names[3].first == "w2.bias");
      randomize(ff, 9);
      Tensor x = rnd64({2, 3, C}, 2);
      Vec h = naive_linear(vec(x), N, C, vec(ff.w1->weight), vec(ff.w1->bias), F);
      for (double& v : h) v = act == Activation::Relu ? std::max(v, 0.0) : 0.5 * v * std::erfc(-v / std::sqrt(2.0));
      Vec want = naive_linear(h, N, F, vec(ff.w2->weight), vec(ff.w2->bias), C);
      Tensor y = ff(x);
      CHECK(y.shape() == Shape{2, 3, C});
      CHECK(max_abs_diff(vec(y), want) < 1e-12);
      require_gradcheck([&](const std::vector<Tensor>& in) { return project(ff(in[0])); }, with_params({x}, ff));
      CHECK_THROWS_AS(ff(rnd64({2, C + 1}, 1)), Error);
    }
  }
  FeedForward nob(4, 8, Activation::Gelu, /*bias=*/false);
  CHECK(nob.parameters().size() == 2);
  CHECK(activation_from_string("gelu") == Activation::Gelu);
  CHECK_THROWS_AS(activation_from_string("swish"), Error);
  CHECK_THROWS_AS(FeedForward(4, 0), Error);
}

// ---------------------------------------------------------------- positions

TEST_CASE("SinusoidalPositionalEncoding is the sin-cos table of the paper, a buffer", "[nn][classic]") {
  const int64_t L = 50, C = 16;
  SinusoidalPositionalEncoding pe(L, C, kFloat64);
  CHECK(pe.parameters().empty());
  CHECK(pe.named_buffers().size() == 1);
  CHECK(pe.state_dict().empty());  // non-persistent
  Vec table = vec(pe.pe);
  for (int64_t pos = 0; pos < L; ++pos)
    for (int64_t i = 0; i < C / 2; ++i) {
      const double angle = pos / std::pow(10000.0, 2.0 * i / C);
      CHECK(table[pos * C + 2 * i] == Approx(std::sin(angle)).margin(1e-14));
      CHECK(table[pos * C + 2 * i + 1] == Approx(std::cos(angle)).margin(1e-14));
    }
  CHECK(table[0] == 0.0);
  CHECK(table[1] == 1.0);
  Tensor x = rnd64({2, 7, C}, 3);
  Tensor y = pe(x);
  Vec xv = vec(x), yv = vec(y);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 7; ++t)
      for (int64_t c = 0; c < C; ++c) CHECK(yv[(b * 7 + t) * C + c] == xv[(b * 7 + t) * C + c] + table[t * C + c]);
  y.sum().backward();  // the gradient passes straight through to x
  CHECK(vec(x.grad()) == Vec(2 * 7 * C, 1.0));
  SinusoidalPositionalEncoding pe32(L, C);  // float32 table, float64 input: converted
  CHECK(max_abs_diff(vec(pe32(x.detach())), yv) < 1e-6);
  SinusoidalPositionalEncoding odd(4, 5, kFloat64);  // odd C: the last column is a sin
  CHECK(vec(odd.pe)[3 * 5 + 4] == Approx(std::sin(3 / std::pow(10000.0, 4.0 / 5))).margin(1e-15));
  CHECK_THROWS_WITH(pe(rnd64({1, L + 1, C}, 1)), Catch::Contains("exceeds max_len"));
  CHECK_THROWS_AS(pe(rnd64({1, 3, C + 2}, 1)), Error);
  CHECK_THROWS_AS(SinusoidalPositionalEncoding(0, 4), Error);
}

TEST_CASE("LearnedPositionalEmbedding adds a trained table row per position", "[nn][classic][gradcheck]") {
  Generator g(4);
  LearnedPositionalEmbedding pe(6, 3, kFloat64, &g);
  REQUIRE(pe.named_parameters().size() == 1);
  CHECK(pe.named_parameters()[0].first == "weight");
  Tensor x = rnd64({2, 4, 3}, 5);
  Tensor y = pe(x);
  Vec xv = vec(x), yv = vec(y), w = vec(pe.weight);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t c = 0; c < 3; ++c) CHECK(yv[(b * 4 + t) * 3 + c] == xv[(b * 4 + t) * 3 + c] + w[t * 3 + c]);
  y.sum().backward();  // rows 0..3 get B = 2, rows 4, 5 nothing
  Vec gw = vec(pe.weight.grad());
  for (int64_t t = 0; t < 6; ++t)
    for (int64_t c = 0; c < 3; ++c) CHECK(gw[t * 3 + c] == (t < 4 ? 2.0 : 0.0));
  require_gradcheck([&](const std::vector<Tensor>& in) { return project(pe(in[0])); }, with_params({x}, pe));
  CHECK_THROWS_WITH(pe(rnd64({1, 7, 3}, 1)), Catch::Contains("exceeds max_len"));
}

// ---------------------------------------------------------------- Dropout

TEST_CASE("Dropout is the identity in eval mode and at p = 0", "[nn][classic][dropout]") {
  Tensor x = rnd64({4, 5}, 1);
  Dropout d(0.5, uint64_t{1});
  d.eval();
  Tensor y = d(x);
  CHECK(y.impl() == x.impl());  // the same tensor: nothing drawn, nothing recorded
  Dropout zero(0.0, uint64_t{1});
  CHECK(zero.is_training());
  CHECK(zero(x).impl() == x.impl());
}

TEST_CASE("Dropout in train mode keeps 1 - p of the elements scaled by 1 over 1 - p", "[nn][classic][dropout]") {
  const double p = 0.3;
  const int64_t n = 200000;
  Dropout d(p, uint64_t{42});
  Tensor x = ones({n}, Options(kFloat64).requires_grad());
  Tensor y = d(x);
  Vec yv = vec(y);
  int64_t dropped = 0, kept_scaled = 0;
  double total = 0;
  for (double v : yv) {
    if (v == 0.0) ++dropped;
    else if (std::abs(v - 1.0 / (1.0 - p)) < 1e-15) ++kept_scaled;
    total += v;
  }
  CHECK(dropped + kept_scaled == n);  // every element is 0 or 1/(1 − p)
  const double frac = static_cast<double>(dropped) / n;  // σ = sqrt(p(1−p)/n) ≈ 0.001
  INFO("dropped fraction " << frac);
  CHECK(std::abs(frac - p) < 0.006);
  CHECK(std::abs(total / n - 1.0) < 0.01);  // E[y] = x
  // dy/dx = m / (1 − p): with x = 1 the gradient equals y.
  y.sum().backward();
  CHECK(vec(x.grad()) == yv);
  // float32 input: the same kind of mask, float32 output.
  Tensor y32 = d(ones({1000}));
  CHECK(y32.dtype() == kFloat32);
}

TEST_CASE("Dropout with the same seed draws the same masks", "[nn][classic][dropout]") {
  Tensor x = rnd64({8, 16}, 2, false);
  Dropout a(0.5, uint64_t{7}), b(0.5, uint64_t{7}), c(0.5, uint64_t{8});
  Vec a1 = vec(a(x)), a2 = vec(a(x));
  CHECK(a1 == vec(b(x)));  // same seed, same first mask
  CHECK(a2 == vec(b(x)));  // and the same second one
  CHECK(a1 != a2);         // successive masks differ
  CHECK(a1 != vec(c(x)));  // another seed, another mask
  // A shared generator: re-seeding it replays the masks.
  auto gen = std::make_shared<Generator>(5);
  Dropout s1(0.25, gen), s2(0.25, gen);
  Vec first = vec(s1(x)), second = vec(s2(x));
  gen->manual_seed(5);
  CHECK(vec(s1(x)) == first);
  CHECK(vec(s2(x)) == second);
}

TEST_CASE("Dropout rejects p outside 0 to 1 (exclusive)", "[nn][classic][dropout]") {
  CHECK_THROWS_WITH(Dropout(1.0), Catch::Contains("[0, 1)"));
  CHECK_THROWS_AS(Dropout(-0.1), Error);
  CHECK_THROWS_AS(Dropout(1.5, uint64_t{1}), Error);
  CHECK_THROWS_AS(Dropout(std::nan("")), Error);
  Dropout d(0.5);
  d.p = 1.0;  // a public field changed afterwards is re-checked
  CHECK_THROWS_AS(d(ones({3})), Error);
  Dropout ok(0.5);
  CHECK_THROWS_AS(ok(from_vector<int64_t>({1, 2}, {2})), Error);
}

// ---------------------------------------------------------------- MultiHeadAttention

TEST_CASE("MultiHeadAttention with a key-padding mask matches a loop", "[nn][classic][attention]") {
  const int64_t B = 2, T = 5, C = 8, H = 2;
  Generator g(3);
  MultiHeadAttention mha(C, H, /*bias=*/true, kFloat64, &g);
  randomize(mha, 4);
  auto names = mha.named_parameters();
  REQUIRE(names.size() == 8);
  CHECK(names[0].first == "q_proj.weight");
  CHECK(names[7].first == "output_proj.bias");
  Tensor x = rnd64({B, T, C}, 5, false);
  const Vec bits{1, 1, 1, 0, 0, 1, 1, 1, 1, 1};  // batch 0: length 3 (2 pads), batch 1: full
  Tensor mask = bool_mask(bits, {B, T});
  for (bool causal : {false, true}) {
    Tensor y = mha(x, x, mask, causal);
    CHECK(y.shape() == Shape{B, T, C});
    CHECK(max_abs_diff(vec(y), naive_mha(mha, vec(x), vec(x), B, T, T, bits, causal)) < 1e-12);
  }
  CHECK(max_abs_diff(vec(mha(x, x)), naive_mha(mha, vec(x), vec(x), B, T, T, {}, false)) < 1e-12);
  // Padded keys are invisible: changing the embeddings at padded positions changes nothing for
  // the real queries of that sequence.
  Vec xv = vec(x);
  for (int64_t t = 3; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) xv[t * C + c] += 10.0;
  Tensor x2 = tensor(xv, {B, T, C}, kFloat64);
  Vec y1 = vec(mha(x, x, mask)), y2 = vec(mha(x2, x2, mask));
  for (int64_t i = 0; i < 3 * C; ++i) CHECK(y1[i] == Approx(y2[i]).margin(1e-12));
  // key_padding_mask from ids.
  Tensor ids = from_vector<int64_t>({4, 5, 6, 0, 0, 1, 2, 3, 4, 5}, {B, T});
  CHECK(vec(key_padding_mask(ids, 0)) == bits);
}

TEST_CASE("MultiHeadAttention cross-attention with Tq != Tk matches a loop", "[nn][classic][attention]") {
  const int64_t B = 2, Tq = 3, Tk = 6, C = 6, H = 3;
  Generator g(8);
  MultiHeadAttention mha(C, H, /*bias=*/true, kFloat64, &g);
  randomize(mha, 9);
  Tensor q = rnd64({B, Tq, C}, 10, false), kv = rnd64({B, Tk, C}, 11, false);
  const Vec bits{1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1};
  Tensor y = mha(q, kv, bool_mask(bits, {B, Tk}));
  CHECK(y.shape() == Shape{B, Tq, C});
  CHECK(max_abs_diff(vec(y), naive_mha(mha, vec(q), vec(kv), B, Tq, Tk, bits, false)) < 1e-12);
  CHECK(max_abs_diff(vec(mha(q, kv)), naive_mha(mha, vec(q), vec(kv), B, Tq, Tk, {}, false)) < 1e-12);
  // Without biases: four [C, C] weights only.
  MultiHeadAttention nob(C, H, /*bias=*/false);
  CHECK(nob.parameters().size() == 4);
}

TEST_CASE("MultiHeadAttention gives zeros, not NaN, for a query with every key masked", "[nn][classic][attention]") {
  const int64_t B = 2, Tq = 2, Tk = 3, C = 4, H = 2;
  Generator g(12);
  MultiHeadAttention mha(C, H, /*bias=*/true, kFloat64, &g);
  randomize(mha, 13);
  Tensor q = rnd64({B, Tq, C}, 14), kv = rnd64({B, Tk, C}, 15);
  const Vec bits{0, 0, 0, 1, 0, 1};  // batch 0 is all padding
  Tensor y = mha(q, kv, bool_mask(bits, {B, Tk}));
  Vec yv = vec(y), bo = vec(mha.output_proj->bias);
  for (double v : yv) REQUIRE(std::isfinite(v));
  for (int64_t i = 0; i < Tq; ++i)
    for (int64_t c = 0; c < C; ++c) CHECK(yv[i * C + c] == Approx(bo[c]).margin(1e-15));  // heads 0 → bias
  CHECK(max_abs_diff(yv, naive_mha(mha, vec(q), vec(kv), B, Tq, Tk, bits, false)) < 1e-12);
  project(y).backward();
  Vec gq = vec(q.grad()), gkv = vec(kv.grad());
  for (double v : gq) REQUIRE(std::isfinite(v));
  for (int64_t i = 0; i < Tq * C; ++i) CHECK(gq[i] == 0.0);       // the dead batch gets no gradient
  for (int64_t i = 0; i < Tk * C; ++i) CHECK(gkv[i] == 0.0);
  // Causal self-attention with left padding: query 0 of batch 0 sees only key 0, a pad → zeros.
  Tensor x = rnd64({1, 3, C}, 16, false);
  const Vec left{0, 1, 1};
  Tensor ys = mha(x, x, bool_mask(left, {1, 3}), /*causal=*/true);
  CHECK(max_abs_diff(vec(ys), naive_mha(mha, vec(x), vec(x), 1, 3, 3, left, true)) < 1e-12);
  for (int64_t c = 0; c < C; ++c) CHECK(vec(ys)[c] == Approx(bo[c]).margin(1e-15));
}

TEST_CASE("MultiHeadAttention gradchecks with a padding mask, causally, and as cross-attention", "[nn][classic][gradcheck]") {
  const int64_t C = 4, H = 2;
  Generator g(20);
  MultiHeadAttention mha(C, H, /*bias=*/true, kFloat64, &g);
  randomize(mha, 21);
  Tensor x = rnd64({2, 3, C}, 22), kv = rnd64({2, 5, C}, 23);
  Tensor self_mask = bool_mask({1, 1, 0, 1, 1, 1}, {2, 3});
  Tensor cross_mask = bool_mask({1, 1, 1, 0, 0, 0, 1, 1, 1, 1}, {2, 5});
  require_gradcheck([&](const std::vector<Tensor>& in) { return project(mha(in[0], in[0], self_mask)); },
                    with_params({x}, mha));
  require_gradcheck([&](const std::vector<Tensor>& in) { return project(mha(in[0], in[0], self_mask, true)); },
                    with_params({x}, mha));
  require_gradcheck([&](const std::vector<Tensor>& in) { return project(mha(in[0], in[1], cross_mask)); },
                    with_params({x, kv}, mha));
  // A dead row (all keys masked) gradchecks too.
  Tensor dead = bool_mask({0, 0, 0, 0, 0, 1, 0, 1, 0, 1}, {2, 5});
  require_gradcheck([&](const std::vector<Tensor>& in) { return project(mha(in[0], in[1], dead)); },
                    with_params({x, kv}, mha));
}

TEST_CASE("MultiHeadAttention rejects bad shapes, head counts and masks", "[nn][classic][attention]") {
  CHECK_THROWS_WITH(MultiHeadAttention(10, 3), Catch::Contains("not divisible"));
  CHECK_THROWS_AS(MultiHeadAttention(0, 1), Error);
  MultiHeadAttention mha(8, 2);
  Tensor x = randn({2, 3, 8}), kv = randn({2, 5, 8});
  CHECK_THROWS_AS(mha(randn({2, 3, 6}), kv), Error);       // query C
  CHECK_THROWS_AS(mha(randn({3, 8}), kv), Error);          // query not 3-D
  CHECK_THROWS_AS(mha(x, randn({2, 5, 4})), Error);        // key_value C
  CHECK_THROWS_AS(mha(x, randn({3, 5, 8})), Error);        // batch mismatch
  CHECK_THROWS_AS(mha(x, kv, ones({2, 5}, kBool), /*causal=*/true), Error);  // causal needs Tq == Tk
  CHECK_THROWS_WITH(mha(x, kv, ones({2, 4}, kBool)), Catch::Contains("key_padding_mask must be [B, Tk]"));
  CHECK_THROWS_AS(mha(x, kv, ones({5}, kBool)), Error);
  CHECK_THROWS_AS(mha(x, kv, ones({1, 5}, kBool)), Error);  // no silent broadcast over B
  CHECK_THROWS_WITH(mha(x, kv, ones({2, 5})), Catch::Contains("must be bool"));  // float mask
  CHECK_THROWS_AS(mha(x, kv, ones({2, 5}, kInt64)), Error);
  CHECK_THROWS_AS(mha(x, Tensor()), Error);
  CHECK_THROWS_AS(key_padding_mask(randn({2, 3}), 0), Error);
}

// ---------------------------------------------------------------- layers and the assembly

TEST_CASE("encoder and decoder layers gradcheck, post-norm and pre-norm", "[nn][classic][gradcheck]") {
  for (bool pre : {false, true}) {
    DYNAMIC_SECTION((pre ? "pre-norm" : "post-norm")) {
      TransformerLayerConfig c;
      c.d_model = 4;
      c.n_heads = 2;
      c.d_ff = 6;
      c.dropout = 0.0;
      c.activation = pre ? Activation::Gelu : Activation::Relu;
      c.norm_first = pre;
      c.dtype = kFloat64;
      Generator g(30);
      TransformerEncoderLayer enc(c, &g);
      TransformerDecoderLayer dec(c, &g);
      randomize(enc, 31, 0.3);
      randomize(dec, 32, 0.3);
      CHECK(enc.named_parameters()[0].first == "self_attn.q_proj.weight");
      CHECK(dec.named_parameters().back().first == "ln3.bias");
      Tensor src = rnd64({2, 4, 4}, 33), tgt = rnd64({2, 3, 4}, 34);
      Tensor src_mask = bool_mask({1, 1, 1, 0, 1, 1, 1, 1}, {2, 4});
      Tensor tgt_mask = bool_mask({1, 1, 0, 1, 1, 1}, {2, 3});
      require_gradcheck([&](const std::vector<Tensor>& in) { return project(enc(in[0], src_mask)); },
                        with_params({src}, enc));
      require_gradcheck([&](const std::vector<Tensor>& in) { return project(dec(in[0], in[1], tgt_mask, src_mask)); },
                        with_params({tgt, src}, dec));
    }
  }
}

TEST_CASE("EncoderDecoder ignores padding and is causal in the target", "[nn][classic]") {
  EncoderDecoderConfig c;
  c.src_vocab_size = c.tgt_vocab_size = 7;
  c.max_len = 8;
  c.d_model = 8;
  c.n_heads = 2;
  c.d_ff = 16;
  c.n_encoder_layers = c.n_decoder_layers = 2;
  c.pad_id = 0;
  c.dropout = 0.1;
  c.dtype = kFloat64;
  for (PositionalKind kind : {PositionalKind::Sinusoidal, PositionalKind::Learned}) {
    c.positional = kind;
    c.norm_first = kind == PositionalKind::Learned;
    Generator g(40);
    EncoderDecoder m(c, &g, std::make_shared<Generator>(41));
    m.eval();  // dropout off
    // The same sequences with and without extra padding give the same logits at real positions.
    Tensor src = from_vector<int64_t>({3, 4, 5, 0, 6, 2, 1, 3}, {2, 4});
    Tensor src_padded = from_vector<int64_t>({3, 4, 5, 0, 0, 0, 6, 2, 1, 3, 0, 0}, {2, 6});
    Tensor tgt = from_vector<int64_t>({1, 5, 4, 1, 2, 0}, {2, 3});
    Tensor tgt_padded = from_vector<int64_t>({1, 5, 4, 0, 1, 2, 0, 0}, {2, 4});
    Vec a = vec(m(src, tgt)), b = vec(m(src_padded, tgt_padded));
    const int64_t V = 7;
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t v = 0; v < V; ++v) CHECK(a[t * V + v] == Approx(b[t * V + v]).margin(1e-12));
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t v = 0; v < V; ++v) CHECK(a[(3 + t) * V + v] == Approx(b[(4 + t) * V + v]).margin(1e-12));
    // Causal: changing target token 2 leaves the logits at positions 0 and 1 alone.
    Vec d = vec(m(src, from_vector<int64_t>({1, 5, 6, 1, 2, 3}, {2, 3})));
    for (int64_t i = 0; i < 2 * V; ++i) CHECK(a[i] == Approx(d[i]).margin(1e-12));
    // Dropout is active in train mode only.
    m.train();
    CHECK(vec(m(src, tgt)) != a);
    m.eval();
    CHECK(vec(m(src, tgt)) == a);
    // greedy_decode returns [B, n ≤ max_new] ids.
    Tensor out = m.greedy_decode(src, 1, 2, 5);
    CHECK(out.dim() == 2);
    CHECK(out.size(0) == 2);
    CHECK(out.size(1) <= 5);
  }
  c.n_heads = 3;
  CHECK_THROWS_AS(EncoderDecoder(c), Error);
  c.n_heads = 2;
  c.pad_id = 7;
  CHECK_THROWS_AS(EncoderDecoder(c), Error);
}
