// test_lm_sampling.cpp — generation pieces of lm/: the Sampler (greedy, temperature, top-k, top-p,
// the draw, determinism, float = double, option errors) against hand-computed distributions and a
// brute-force reference, and Utf8Stream (every split of multi-byte text, U+FFFD exactly as Python's
// bytes.decode("utf-8", errors="replace"), the concatenation equal to Tokenizer::decode).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "autograd/generator.h"
#include "data/bpe_trainer.h"
#include "data/tokenizer.h"
#include "data/utf8.h"
#include "kernels/error.h"
#include "lm/sampler.h"
#include "lm/utf8_stream.h"

using namespace tapegrad;
using lm::Sampler;
using lm::SamplerOptions;
using lm::Utf8Stream;
using Catch::Matchers::Contains;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

SamplerOptions make_options(double temperature, int64_t top_k = 0, double top_p = 1.0, bool greedy = false) {
  SamplerOptions o;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.greedy = greedy;
  return o;
}

std::vector<uint32_t> ids_of(const std::vector<std::pair<uint32_t, double>>& d) {
  std::vector<uint32_t> out;
  for (const auto& [id, p] : d) out.push_back(id);
  return out;
}

std::vector<double> random_logits(size_t n, uint64_t seed, double scale = 3.0) {
  Generator g(seed);
  std::vector<double> z(n);
  for (auto& x : z) x = scale * g.normal();
  return z;
}

// The reference: the full order by (logit desc, id asc), softmax in long double, top-k, then the
// smallest prefix with renormalised mass >= top_p. Returns the kept ids in that order.
std::vector<uint32_t> reference_kept(const std::vector<double>& z, double temperature, int64_t top_k, double top_p) {
  std::vector<uint32_t> order(z.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return z[a] != z[b] ? z[a] > z[b] : a < b; });
  if (top_k > 0 && size_t(top_k) < order.size()) order.resize(size_t(top_k));
  const long double m = z[order[0]];
  long double total = 0;
  for (uint32_t i : order) total += std::exp((z[i] - m) / (long double)temperature);
  long double cum = 0;
  for (size_t j = 0; j < order.size(); ++j) {
    cum += std::exp((z[order[j]] - m) / (long double)temperature);
    if (cum / total >= top_p) {
      order.resize(j + 1);
      break;
    }
  }
  return order;
}

std::vector<double> softmax(const std::vector<double>& z, double temperature = 1.0) {
  const double m = *std::max_element(z.begin(), z.end());
  std::vector<double> p(z.size());
  double total = 0;
  for (size_t i = 0; i < z.size(); ++i) total += (p[i] = std::exp((z[i] - m) / temperature));
  for (auto& x : p) x /= total;
  return p;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// SamplerOptions

TEST_CASE("SamplerOptions::validate names the option and the value", "[sampling]") {
  CHECK_NOTHROW(SamplerOptions{}.validate());
  CHECK_NOTHROW(make_options(0.0).validate());                  // temperature 0: greedy
  CHECK_NOTHROW(make_options(0.7, 40, 0.9).validate());
  CHECK_NOTHROW(make_options(1.0, 0, 1e-9).validate());
  CHECK_THROWS_WITH(make_options(-1.0).validate(), "--temperature must be a finite number >= 0, but is -1");
  CHECK_THROWS_WITH(make_options(kInf).validate(), Contains("--temperature must be a finite number >= 0"));
  CHECK_THROWS_WITH(make_options(std::nan("")).validate(), Contains("--temperature"));
  CHECK_THROWS_WITH(make_options(1.0, -3).validate(), "--top-k must be >= 1 (0: off), but is -3");
  CHECK_THROWS_WITH(make_options(1.0, 0, 0.0).validate(), "--top-p must be in (0, 1], but is 0");
  CHECK_THROWS_WITH(make_options(1.0, 0, 1.5).validate(), "--top-p must be in (0, 1], but is 1.5");
  CHECK_THROWS_WITH(make_options(1.0, 0, -0.5).validate(), Contains("--top-p"));
  CHECK_THROWS_WITH(make_options(1.0, 0, std::nan("")).validate(), Contains("--top-p"));
  CHECK_THROWS_AS(Sampler(make_options(1.0, -1), 0), Error);  // the constructor validates
}

TEST_CASE("Sampler rejects empty rows, NaN, +inf and all -inf, a -inf token is never drawn", "[sampling]") {
  for (const auto& o : {make_options(1.0), make_options(0.0), make_options(1.0, 2, 0.5)}) {
    Sampler s(o, 1);
    CHECK_THROWS_WITH(s.sample(std::span<const double>()), Contains("empty"));
    CHECK_THROWS_WITH(s.sample(std::vector<double>{0.0, std::nan(""), 1.0}), Contains("token 1"));
    CHECK_THROWS_WITH(s.sample(std::vector<float>{0.f, 1.f, std::numeric_limits<float>::infinity()}),
                      Contains("token 2"));
    CHECK_THROWS_WITH(s.sample(std::vector<double>{-kInf, -kInf}), Contains("every logit is -inf"));
  }
  Sampler s(make_options(1.0), 3);
  const std::vector<double> z{-kInf, 0.0, -kInf, 0.0, -kInf};
  for (int i = 0; i < 2000; ++i) {
    const uint32_t id = s.sample(z);
    REQUIRE((id == 1 || id == 3));
  }
  const auto d = s.distribution(z);
  REQUIRE(d.size() == 5);  // nothing truncated: every token, id order, -inf ones with probability 0
  CHECK(d[1].second == 0.5);
  CHECK(d[0].second == 0.0);
}

// ---------------------------------------------------------------------------------------------
// greedy and temperature

TEST_CASE("greedy picks the argmax, the lowest id among ties, and uses no random number", "[sampling]") {
  const std::vector<double> z{1.0, 5.0, 3.0, 5.0, -2.0, 5.0};
  for (const auto& o : {make_options(1.0, 0, 1.0, true), make_options(0.0), make_options(0.0, 3, 0.2),
                        make_options(2.0, 0, 1.0, true)}) {
    Sampler s(o, 42);
    const auto before = s.state();
    for (int i = 0; i < 10; ++i) CHECK(s.sample(z) == 1);
    CHECK(s.state() == before);
    const auto d = s.distribution(z);
    REQUIRE(d.size() == 1);
    CHECK(d[0] == std::pair<uint32_t, double>{1, 1.0});
  }
  Sampler s(make_options(0.0), 0);
  CHECK(s.sample(std::vector<double>{-kInf, -1e300, -kInf}) == 1);
  CHECK(s.sample(std::vector<float>{7.f}) == 0);
}

TEST_CASE("temperature 1e-6 gives the greedy token, temperature reshapes the softmax", "[sampling]") {
  Sampler greedy(make_options(0.0), 1), cold(make_options(1e-6), 2);
  for (uint64_t row = 0; row < 200; ++row) {
    const auto z = random_logits(1 + row % 97, 100 + row);  // normal logits: no ties
    const uint32_t g = greedy.sample(z);
    CHECK(g == uint32_t(std::max_element(z.begin(), z.end()) - z.begin()));
    CHECK(cold.sample(z) == g);
  }
  // p_i = exp((z_i − max z)/T) / Σ_j exp((z_j − max z)/T)
  const std::vector<double> z{0.0, 1.0, 2.0, -1.0};
  for (const double t : {0.25, 1.0, 4.0}) {
    const auto d = Sampler(make_options(t), 0).distribution(z);
    const auto p = softmax(z, t);
    REQUIRE(d.size() == 4);
    for (uint32_t i = 0; i < 4; ++i) {
      CHECK(d[i].first == i);  // nothing truncated: id order
      CHECK(d[i].second == Approx(p[i]).epsilon(1e-14));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// top-k

TEST_CASE("top-k keeps exactly the k highest logits, equal logits by lower id", "[sampling]") {
  //                            id: 0    1    2    3    4    5
  const std::vector<double> z{1.0, 3.0, 2.0, 3.0, 0.0, 2.0};
  // Ranked (logit desc, id asc): 1, 3, 2, 5, 0, 4.
  const std::vector<std::vector<uint32_t>> expected{{1}, {1, 3}, {1, 3, 2}, {1, 3, 2, 5}, {1, 3, 2, 5, 0}};
  for (int64_t k = 1; k <= 5; ++k) {
    const auto d = Sampler(make_options(1.0, k), 0).distribution(z);
    CHECK(ids_of(d) == expected[size_t(k - 1)]);
    double total = 0;
    for (const auto& [id, p] : d) total += std::exp(z[id] - 3.0);
    for (const auto& [id, p] : d) CHECK(p == Approx(std::exp(z[id] - 3.0) / total).epsilon(1e-14));
  }
  // k >= V keeps every token (as top_k = 0 does: id order).
  for (const int64_t k : {6, 7, 1000}) CHECK(ids_of(Sampler(make_options(1.0, k), 0).distribution(z)) ==
                                             std::vector<uint32_t>{0, 1, 2, 3, 4, 5});
  // Draws only from the kept set, and from all of it.
  Sampler s(make_options(1.0, 3), 9);
  std::set<uint32_t> seen;
  for (int i = 0; i < 3000; ++i) seen.insert(s.sample(z));
  CHECK(seen == std::set<uint32_t>{1, 2, 3});

  // Against the brute-force reference on rows full of ties (small integer logits).
  Generator g(5);
  for (int row = 0; row < 200; ++row) {
    const size_t n = 1 + g.below(300);
    std::vector<double> zz(n);
    for (auto& x : zz) x = double(g.below(7));
    const int64_t k = 1 + int64_t(g.below(n + 5));
    const auto d = Sampler(make_options(0.8, k), 0).distribution(zz);
    const auto ref = reference_kept(zz, 0.8, k, 1.0);
    if (size_t(k) < n) {
      REQUIRE(d.size() == size_t(k));
      CHECK(ids_of(d) == ref);
    } else {
      REQUIRE(d.size() == n);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// top-p

TEST_CASE("top-p keeps the smallest prefix with mass >= p", "[sampling]") {
  // Probabilities 1/8, 1/2, 1/8, 1/4 (ids 0..3): ranked 1, 3, 0, 2 with cumulative mass
  // 0.5, 0.75, 0.875, 1.
  const std::vector<double> z{std::log(0.125), std::log(0.5), std::log(0.125), std::log(0.25)};
  const auto kept = [&](double p, int64_t k = 0) { return ids_of(Sampler(make_options(1.0, k, p), 0).distribution(z)); };
  CHECK(kept(1e-12) == std::vector<uint32_t>{1});   // tiny p keeps one token
  CHECK(kept(0.3) == std::vector<uint32_t>{1});
  CHECK(kept(0.5) == std::vector<uint32_t>{1});     // p equal to a cumulative mass keeps that prefix
  CHECK(kept(0.5 + 1e-9) == std::vector<uint32_t>{1, 3});
  CHECK(kept(0.75) == std::vector<uint32_t>{1, 3});
  CHECK(kept(0.75 + 1e-9) == std::vector<uint32_t>{1, 3, 0});
  CHECK(kept(0.875) == std::vector<uint32_t>{1, 3, 0});  // 0 before 2: equal probability, lower id
  CHECK(kept(0.9) == std::vector<uint32_t>{1, 3, 0, 2});
  CHECK(kept(1.0) == std::vector<uint32_t>{0, 1, 2, 3});  // p = 1 keeps all (id order, no sort)
  // Renormalised: {0.5, 0.75} -> {2/3, 1/3}.
  const auto d = Sampler(make_options(1.0, 0, 0.75), 0).distribution(z);
  CHECK(d[0].second == Approx(2.0 / 3).epsilon(1e-14));
  CHECK(d[1].second == Approx(1.0 / 3).epsilon(1e-14));
  // After top-k, top-p measures mass within the k kept (as transformers and llama.cpp do): with
  // k = 2 the masses are 2/3, 1/3, so p = 0.6 keeps one token (over the whole row 0.5 < 0.6 would not).
  CHECK(kept(0.6, 2) == std::vector<uint32_t>{1});
  CHECK(kept(0.7, 2) == std::vector<uint32_t>{1, 3});
  CHECK(kept(0.7, 3) == std::vector<uint32_t>{1, 3});  // masses 4/7, 2/7, 1/7

  // Against the brute-force reference: large flat rows (the prefix is built in growing chunks:
  // 64, 256, 1024, … tokens) and peaked ones, with and without top-k.
  Generator g(11);
  for (int row = 0; row < 60; ++row) {
    const size_t n = 1 + g.below(row < 30 ? 6000 : 200);
    const auto zz = random_logits(n, 1000 + uint64_t(row), row % 3 == 0 ? 0.3 : 4.0);
    const double p = 0.05 + 0.9 * g.uniform();
    const int64_t k = row % 2 ? int64_t(1 + g.below(n)) : 0;
    const auto dd = Sampler(make_options(1.3, k, p), 0).distribution(zz);
    CHECK(ids_of(dd) == reference_kept(zz, 1.3, k, p));
    double total = 0;
    for (const auto& [id, q] : dd) total += q;
    CHECK(total == Approx(1.0).epsilon(1e-12));
  }
}

// ---------------------------------------------------------------------------------------------
// the draw

TEST_CASE("20,000 draws match the softmax (chi-square) and the truncated distribution", "[sampling]") {
  const std::vector<double> z{0.5, -1.0, 2.0, 0.0, 1.0, -0.5, 1.5, -2.0};
  for (const auto& o : {make_options(1.0), make_options(0.7, 5), make_options(1.0, 0, 0.8), make_options(1.5, 6, 0.9)}) {
    Sampler s(o, 2024);
    const auto d = s.distribution(z);
    std::vector<double> expected(z.size(), 0.0);
    for (const auto& [id, p] : d) expected[id] = p;
    if (o.top_k == 0 && o.top_p == 1.0) {
      const auto p = softmax(z, o.temperature);
      for (size_t i = 0; i < z.size(); ++i) CHECK(expected[i] == Approx(p[i]).epsilon(1e-14));
    }
    const int n = 20000;
    std::vector<int> count(z.size(), 0);
    for (int i = 0; i < n; ++i) ++count[s.sample(z)];
    double chi2 = 0;
    for (size_t i = 0; i < z.size(); ++i) {
      if (expected[i] == 0) {
        CHECK(count[i] == 0);
        continue;
      }
      const double mean = n * expected[i], sd = std::sqrt(n * expected[i] * (1 - expected[i]));
      chi2 += (count[i] - mean) * (count[i] - mean) / mean;
      CHECK(std::abs(count[i] - mean) < 4.5 * sd + 1);
    }
    // At most 7 degrees of freedom: P(χ²_7 > 24.3) = 0.001.
    CHECK(chi2 < 24.3);
  }
}

TEST_CASE("the draw is the inverse CDF of one uniform() over the kept tokens in draw order", "[sampling]") {
  const std::vector<double> z{0.5, -1.0, 2.0, 0.0, 1.0, -0.5, 1.5, -2.0};
  for (const auto& o : {make_options(1.0), make_options(0.9, 4), make_options(1.0, 0, 0.7)}) {
    Sampler s(o, 77);
    Generator g(77);
    const auto d = s.distribution(z);
    for (int i = 0; i < 500; ++i) {
      const double u = g.uniform();
      double cum = 0;
      uint32_t want = d.back().first;
      for (const auto& [id, p] : d) {
        cum += p;
        if (cum > u) {
          want = id;
          break;
        }
      }
      REQUIRE(s.sample(z) == want);
      REQUIRE(s.state() == g.state());  // exactly one uniform() per sample
    }
  }
}

TEST_CASE("same seed gives the same ids, another seed other ids, state round-trips", "[sampling]") {
  const auto z = random_logits(500, 3, 1.0);
  for (const auto& o : {make_options(1.0), make_options(0.8, 50), make_options(1.0, 0, 0.95), make_options(1.2, 100, 0.9)}) {
    Sampler a(o, 1234), b(o, 1234), c(o, 1235);
    std::vector<uint32_t> ra, rb, rc;
    for (int i = 0; i < 200; ++i) {
      ra.push_back(a.sample(z));
      rb.push_back(b.sample(z));
      rc.push_back(c.sample(z));
    }
    CHECK(ra == rb);
    CHECK(ra != rc);
    // Resuming from a saved state continues the same sequence.
    const auto saved = a.state();
    std::vector<uint32_t> next;
    for (int i = 0; i < 20; ++i) next.push_back(a.sample(z));
    Sampler d(o, 999);
    d.set_state(saved);
    for (int i = 0; i < 20; ++i) CHECK(d.sample(z) == next[size_t(i)]);
  }
  // Fixed values: these ids are what seed 7 gives on every machine (the generator is our own).
  Sampler s(make_options(1.0), 7);
  const std::vector<double> flat(10, 0.0);  // uniform over 10: id = floor(10 u)
  Generator g(7);
  for (int i = 0; i < 50; ++i) CHECK(s.sample(flat) == uint32_t(10 * g.uniform()));
}

TEST_CASE("float and double logits give the same ids and distributions", "[sampling]") {
  Generator g(8);
  std::vector<float> zf(3000);
  for (auto& x : zf) x = float(2.5 * g.normal());
  zf[17] = zf[2000] = *std::max_element(zf.begin(), zf.end());  // a tie at the top
  const std::vector<double> zd(zf.begin(), zf.end());
  for (const auto& o : {make_options(1.0), make_options(0.0), make_options(0.7, 40), make_options(1.0, 0, 0.9),
                        make_options(1.1, 200, 0.95)}) {
    Sampler a(o, 5), b(o, 5);
    for (int i = 0; i < 300; ++i) REQUIRE(a.sample(zf) == b.sample(zd));
    CHECK(a.distribution(zf) == b.distribution(zd));
  }
}

TEST_CASE("sampler timing over a 32000-token vocabulary", "[sampling][.timing]") {
  std::vector<float> z(32000);
  Generator g(1);
  for (auto& x : z) x = float(3.0 * g.normal());
  for (const auto& [name, o] : std::vector<std::pair<const char*, SamplerOptions>>{
           {"greedy", make_options(0.0)}, {"temperature 1", make_options(1.0)}, {"top-k 50", make_options(0.8, 50)},
           {"top-p 0.9", make_options(1.0, 0, 0.9)}, {"top-p 0.95, T 2 (flat)", make_options(2.0, 0, 0.95)},
           {"top-k 50 + top-p 0.9", make_options(0.8, 50, 0.9)}}) {
    Sampler s(o, 1);
    uint64_t sink = s.sample(z);
    const int reps = 100;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) sink += s.sample(z);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
    std::printf("sample, V = 32000, %-24s %8.1f us (kept %zu)\n", name, us, s.distribution(z).size());
    CHECK(sink > 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Utf8Stream

namespace {

// Pushes `bytes` in pieces cut at `cuts` (ascending), then finishes; checks every output is valid
// UTF-8 and at most 3 bytes are ever held back.
std::string stream_in_pieces(std::string_view bytes, const std::vector<size_t>& cuts) {
  Utf8Stream s;
  std::string out;
  size_t start = 0;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const size_t end = i < cuts.size() ? cuts[i] : bytes.size();
    const std::string piece = s.push(bytes.substr(start, end - start));
    REQUIRE(data::replace_invalid_utf8(piece) == piece);
    REQUIRE(s.pending() <= 3);
    out += piece;
    start = end;
  }
  out += s.finish();
  REQUIRE(s.pending() == 0);
  return out;
}

// Every split into pushes of equal size, and every split into three pieces (two cuts).
void check_every_split(std::string_view bytes, const std::string& expected) {
  for (size_t size = 1; size <= bytes.size() + 1; ++size) {
    std::vector<size_t> cuts;
    for (size_t c = size; c < bytes.size(); c += size) cuts.push_back(c);
    REQUIRE(stream_in_pieces(bytes, cuts) == expected);
  }
  for (size_t a = 0; a <= bytes.size(); ++a)
    for (size_t b = a; b <= bytes.size(); ++b) REQUIRE(stream_in_pieces(bytes, {a, b}) == expected);
}

}  // namespace

TEST_CASE("Utf8Stream: every split of multi-byte text gives the whole text back", "[sampling]") {
  // ASCII, 2-byte (é ñ ß), 3-byte (€ 中 文), 4-byte (😀 𝄞), a flag (two 4-byte regional indicators),
  // a ZWJ family emoji, U+10FFFF and U+FFFD itself.
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80 n\xC3\xB1 \xC3\x9F \xE4\xB8\xAD\xE6\x96\x87 "
                           "\xF0\x9D\x84\x9E \xF0\x9F\x87\xA9\xF0\x9F\x87\xAA "
                           "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 "
                           "\xF4\x8F\xBF\xBF\xEF\xBF\xBD!";
  REQUIRE(data::replace_invalid_utf8(text) == text);
  check_every_split(text, text);

  // Byte by byte, a held-back character comes out whole with its last byte.
  Utf8Stream s;
  CHECK(s.push("\xF0") == "");
  CHECK(s.push("\x9F") == "");
  CHECK(s.push("\x98") == "");
  CHECK(s.pending() == 3);
  CHECK(s.push("\x80x") == "\xF0\x9F\x98\x80x");
  CHECK(s.push("") == "");
  CHECK(s.finish() == "");
}

TEST_CASE("Utf8Stream: invalid bytes become U+FFFD as Python's errors=\"replace\" does", "[sampling]") {
  const std::string R = "\xEF\xBF\xBD";  // U+FFFD
  // Expected values are b.decode("utf-8", errors="replace") in Python 3.11 (checked by hand
  // against the maximal-subpart rule, Unicode §3.9, Table 3-7).
  const std::vector<std::pair<std::string, std::string>> table{
      {"\xFF", R},                                    // can never appear in UTF-8
      {"a\x80" "b", "a" + R + "b"},                   // lone continuation byte
      {"\x80\x80", R + R},                            // one U+FFFD per stray continuation byte
      {"\xC0\xAF", R + R},                            // overlong '/': C0 is never a lead byte
      {"\xE0\x80\xAF", R + R + R},                    // overlong: E0 needs A0..BF next
      {"\xED\xA0\x80", R + R + R},                    // surrogate U+D800: ED needs 80..9F next
      {"\xED\x9F\xBF", "\xED\x9F\xBF"},               // U+D7FF, the last before the surrogates
      {"\xEE\x80\x80", "\xEE\x80\x80"},               // U+E000, the first after them
      {"\xF4\x90\x80\x80", R + R + R + R},            // U+110000 > U+10FFFF
      {"\xF4\x8F\xBF\xBF", "\xF4\x8F\xBF\xBF"},       // U+10FFFF
      {"\xF5\x80", R + R},                            // F5..FF never lead
      {"\xE2\x82" "a", R + "a"},                      // truncated € then a non-continuation: one U+FFFD
      {"\xF0\x9F\x98!", R + "!"},                     // truncated 😀: one U+FFFD
      {"\xE2\x82", R},                                // truncated at the end: finish() flushes one U+FFFD
      {"\xC2", R},
      {"\xE0\xA0", R},
      {"\xC3\xC3\xA9", R + "\xC3\xA9"},               // a lead cut short by another lead: 'é' survives
      {"\xF0\x9F\x98\x80\x80", "\xF0\x9F\x98\x80" + R},  // 😀 then a stray continuation
      {"\xE2(\xA1", R + "(" + R},
      {"\xF1\x80\x80\xE1\x80\xC2", R + R + R},        // three truncated sequences
      {"\xEF\xBF\xBD", R},                            // U+FFFD itself is valid
  };
  for (const auto& [in, want] : table) {
    INFO("input length " << in.size());
    REQUIRE(data::replace_invalid_utf8(in) == want);  // the reference decoder agrees with the table
    check_every_split(in, want);
  }
  // finish() flushes a held-back tail as one U+FFFD and starts over.
  Utf8Stream s;
  CHECK(s.push("ok\xF0\x9F") == "ok");
  CHECK(s.finish() == R);
  CHECK(s.push("\x98\x80") == R + R);  // after finish the continuation bytes are strays
  CHECK(s.finish() == "");
}

TEST_CASE("Utf8Stream: random bytes in random pieces give replace_invalid_utf8 of the whole", "[sampling]") {
  // Pieces of valid characters and of bytes likely to be ill-formed, cut anywhere.
  const std::vector<std::string> atoms{"a", " ", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\x80", "\xBF",
                                       "\xC2", "\xE0", "\xED", "\xF0", "\xF4", "\xFF", "\xE0\xA0", "\xF0\x90"};
  Generator g(21);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes;
    const size_t n = g.below(12);
    for (size_t i = 0; i < n; ++i) {
      if (g.below(4) == 0)
        bytes.push_back(char(g.below(256)));
      else
        bytes += atoms[g.below(atoms.size())];
    }
    std::vector<size_t> cuts;
    for (size_t c = 0; c < bytes.size(); ++c)
      if (g.below(3) == 0) cuts.push_back(c);
    REQUIRE(stream_in_pieces(bytes, cuts) == data::replace_invalid_utf8(bytes));
  }
}

TEST_CASE("Utf8Stream: token by token equals Tokenizer::decode of all the ids", "[sampling]") {
  std::string text;
  for (int i = 0; i < 8; ++i)
    text += "Once upon a time, caf\xC3\xA9 na\xC3\xAFve \xE2\x82\xAC" "5 \xF0\x9F\x98\x80\xF0\x9F\x98\x80 "
            "\xE4\xB8\xAD\xE6\x96\x87 \xCE\xB1\xCE\xB2\xCE\xB3 the end.<|endoftext|>";
  data::BpeTrainOptions options;
  options.vocab_size = 1 + 256 + 40;
  options.special_tokens = {"<|endoftext|>"};
  data::Tokenizer tokenizer(data::train_bpe(text, options));
  REQUIRE(tokenizer.vocab_size() == 297);

  // The encoded text, token by token, streams back exactly.
  const auto encoded = tokenizer.encode(text);
  {
    Utf8Stream s;
    std::string out;
    for (const uint32_t id : encoded) out += s.push(tokenizer.decode_bytes({id}));
    out += s.finish();
    CHECK(out == text);
  }
  // Random ids (single bytes included, so the tail is often cut or ill-formed).
  Generator g(33);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<uint32_t> ids(g.below(40));
    for (auto& id : ids) id = uint32_t(g.below(tokenizer.vocab_size()));
    Utf8Stream s;
    std::string out;
    for (const uint32_t id : ids) out += s.push(tokenizer.decode_bytes({id}));
    out += s.finish();
    REQUIRE(out == tokenizer.decode(ids));
  }
}
