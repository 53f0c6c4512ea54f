// test_nn_seq2seq_sampling.cpp — temperature / top-k sampling for the encoder-decoder
// (nn/encoder_decoder.h: sample_token, EncoderDecoder::sample_decode): temperature → 0 and top_k = 1
// are greedy, a draw is always among the top k, the frequencies follow softmax(z/T), the same seed gives
// the same tokens, and bad options or arguments are clear errors. The model is small and untrained (its
// logits are random but distinct), so the tests are fast and need no training.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "nn/encoder_decoder.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {

constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kVocab = 13;
constexpr double kInf = std::numeric_limits<double>::infinity();

std::unique_ptr<EncoderDecoder> make_model() {
  EncoderDecoderConfig c;
  c.src_vocab_size = c.tgt_vocab_size = kVocab;
  c.max_len = 10;
  c.d_model = 16;
  c.n_heads = 2;
  c.d_ff = 32;
  c.dropout = 0.0;
  c.pad_id = kPad;
  Generator init(5);
  auto m = std::make_unique<EncoderDecoder>(c, &init);
  m->eval();
  return m;
}

// Five source rows of digits (ids 3..12) of different lengths, EOS, right-padded.
Tensor make_source() {
  return from_vector<int64_t>({3, 4, 5, 2, 0, 0,  //
                               9, 8, 7, 6, 5, 2,  //
                               12, 2, 0, 0, 0, 0, //
                               4, 4, 11, 10, 2, 0, //
                               7, 3, 2, 0, 0, 0},
                              {5, 6});
}

// Ids of the k highest logits (equal logits: lower id first).
std::vector<int64_t> top_k_ids(const std::vector<double>& z, int64_t k) {
  std::vector<int64_t> ids(z.size());
  for (size_t i = 0; i < z.size(); ++i) ids[i] = static_cast<int64_t>(i);
  // std::sort with the id as tie-break (libstdc++ 12's std::stable_sort trips clang's -Wdeprecated-declarations)
  std::sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
  ids.resize(static_cast<size_t>(k));
  return ids;
}

}  // namespace

TEST_CASE("sample_token: temperature 0 and top_k 1 are the arg-max and draw no random number", "[nn][seq2seq][sampling]") {
  const std::vector<double> z = {0.5, 2.0, -1.0, 2.0, 1.9};  // two equal maxima: the lower id wins
  Generator gen(1);
  const Generator::State before = gen.state();
  CHECK(sample_token(z, SamplingOptions{0.0, 0}, gen) == 1);
  CHECK(sample_token(z, SamplingOptions{1.0, 1}, gen) == 1);
  CHECK(sample_token(z, SamplingOptions{5.0, 1}, gen) == 1);
  CHECK(gen.state() == before);
  // Any other option draws exactly one uniform.
  sample_token(z, SamplingOptions{1.0, 0}, gen);
  Generator one(1);
  one.uniform();
  CHECK(gen.state() == one.state());
}

TEST_CASE("sample_token: every draw is among the top k, and each of them is drawn", "[nn][sampling]") {
  const std::vector<double> z = {0.1, 3.0, -2.0, 2.5, 2.9, -kInf, 0.0, 2.5};
  for (int64_t k : {2, 3, 4, 7}) {
    INFO("top_k " << k);
    const std::vector<int64_t> allowed = top_k_ids(z, k);  // k = 4: {1, 4, 3, 7} (3 before 7: equal logits)
    Generator gen(42 + static_cast<uint64_t>(k));
    std::vector<int> seen(z.size(), 0);
    for (int i = 0; i < 3000; ++i) {
      const int64_t id = sample_token(z, SamplingOptions{1.5, k}, gen);
      REQUIRE(std::find(allowed.begin(), allowed.end(), id) != allowed.end());
      ++seen[static_cast<size_t>(id)];
    }
    for (int64_t id : allowed) CHECK(seen[static_cast<size_t>(id)] > 0);
    CHECK(seen[5] == 0);  // −inf: never
  }
  // Exactly min(k, V) kept: top_k above V keeps everything (and the −inf token is still never drawn).
  Generator gen(3);
  for (int i = 0; i < 500; ++i) CHECK(sample_token(z, SamplingOptions{1.0, 100}, gen) != 5);
}

TEST_CASE("sample_token: frequencies follow softmax(z / T)", "[nn][sampling]") {
  // z = {0, log 3}: p(1) = 3/4 at T = 1, √3/(1 + √3) ≈ 0.634 at T = 2, ≈ 1 at T = 0.05.
  const std::vector<double> z = {0.0, std::log(3.0)};
  const auto frequency_of_1 = [&](double temperature) {
    Generator gen(11);
    int ones = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) ones += sample_token(z, SamplingOptions{temperature, 0}, gen) == 1;
    return static_cast<double>(ones) / n;
  };
  CHECK(frequency_of_1(1.0) == Approx(0.75).margin(0.015));
  CHECK(frequency_of_1(2.0) == Approx(std::sqrt(3.0) / (1 + std::sqrt(3.0))).margin(0.015));
  CHECK(frequency_of_1(0.05) > 0.999);
}

TEST_CASE("sample_token: bad logits and options are clear errors", "[nn][sampling]") {
  Generator gen(1);
  const std::vector<double> ok = {1.0, 2.0};
  CHECK_THROWS_WITH(sample_token(ok, SamplingOptions{-1.0, 0}, gen), Catch::Contains("temperature must be a finite number >= 0"));
  CHECK_THROWS_WITH(sample_token(ok, SamplingOptions{std::nan(""), 0}, gen), Catch::Contains("temperature"));
  CHECK_THROWS_WITH(sample_token(ok, SamplingOptions{kInf, 0}, gen), Catch::Contains("temperature"));
  CHECK_THROWS_WITH(sample_token(ok, SamplingOptions{1.0, -2}, gen), Catch::Contains("top_k must be >= 0"));
  CHECK_THROWS_WITH(sample_token(std::vector<double>{}, SamplingOptions{}, gen), Catch::Contains("empty"));
  CHECK_THROWS_WITH(sample_token(std::vector<double>{1.0, std::nan("")}, SamplingOptions{}, gen),
                    Catch::Contains("logit 1 is nan"));
  CHECK_THROWS_WITH(sample_token(std::vector<double>{kInf, 0.0}, SamplingOptions{}, gen), Catch::Contains("logit 0 is inf"));
  CHECK_THROWS_WITH(sample_token(std::vector<double>{-kInf, -kInf}, SamplingOptions{}, gen),
                    Catch::Contains("every logit is -inf"));
}

TEST_CASE("sample_decode: temperature → 0 and top_k 1 give greedy_decode's tokens", "[nn][seq2seq][sampling]") {
  const auto model_ptr = make_model();
  const EncoderDecoder& model = *model_ptr;
  const Tensor src = make_source();
  const std::vector<int64_t> greedy = model.greedy_decode(src, kBos, kEos, 8).to_vector<int64_t>();
  Generator gen(7);
  CHECK(model.sample_decode(src, kBos, kEos, 8, SamplingOptions{0.0, 0}, gen).to_vector<int64_t>() == greedy);
  CHECK(model.sample_decode(src, kBos, kEos, 8, SamplingOptions{1e-6, 0}, gen).to_vector<int64_t>() == greedy);
  CHECK(model.sample_decode(src, kBos, kEos, 8, SamplingOptions{3.0, 1}, gen).to_vector<int64_t>() == greedy);
}

TEST_CASE("sample_decode: each sampled token is among the top k of its step's logits", "[nn][seq2seq][sampling]") {
  const auto model_ptr = make_model();
  const EncoderDecoder& model = *model_ptr;
  const Tensor src = make_source();
  const int64_t B = src.size(0), k = 3;
  Generator gen(2024);
  const Tensor out = model.sample_decode(src, kBos, kEos, 8, SamplingOptions{2.0, k}, gen);  // [B, n]
  const int64_t n = out.size(1);
  const std::vector<int64_t> ids = out.to_vector<int64_t>();
  // Replay: the decoder's input for step j is BOS followed by the first j produced tokens.
  NoGradGuard no_grad;
  const Tensor memory = model.encode(src);
  for (int64_t j = 0; j < n; ++j) {
    std::vector<int64_t> prefix;
    for (int64_t b = 0; b < B; ++b) {
      prefix.push_back(kBos);
      for (int64_t i = 0; i < j; ++i) prefix.push_back(ids[b * n + i]);
    }
    const Tensor logits = model.decode(from_vector<int64_t>(prefix, {B, j + 1}), memory, model.padding_mask(src));
    for (int64_t b = 0; b < B; ++b) {
      bool ended = false;  // positions after a row's EOS hold padding
      for (int64_t i = 0; i < j; ++i) ended = ended || ids[b * n + i] == kEos;
      if (ended) {
        CHECK(ids[b * n + j] == kPad);
        continue;
      }
      const std::vector<int64_t> allowed =
          top_k_ids(logits.select(0, b).select(0, j).to(kFloat64).to_vector<double>(), k);
      INFO("row " << b << ", step " << j);
      CHECK(std::find(allowed.begin(), allowed.end(), ids[b * n + j]) != allowed.end());
    }
  }
}

TEST_CASE("sample_decode: the same seed gives the same tokens, another seed other tokens", "[nn][seq2seq][sampling]") {
  const auto model_ptr = make_model();
  const EncoderDecoder& model = *model_ptr;
  const Tensor src = make_source();
  const SamplingOptions hot{1.5, 0};
  Generator a(99), b(99), c(100);
  const std::vector<int64_t> first = model.sample_decode(src, kBos, kEos, 8, hot, a).to_vector<int64_t>();
  CHECK(model.sample_decode(src, kBos, kEos, 8, hot, b).to_vector<int64_t>() == first);
  CHECK(a.state() == b.state());
  // 5 rows of up to 8 draws at T = 1.5 over 13 tokens: another seed giving all the same is not plausible.
  CHECK(model.sample_decode(src, kBos, kEos, 8, hot, c).to_vector<int64_t>() != first);
}

TEST_CASE("sample_decode: bad arguments are clear errors, raised before any draw", "[nn][seq2seq][sampling]") {
  const auto model_ptr = make_model();
  const EncoderDecoder& model = *model_ptr;
  const Tensor src = make_source();
  Generator gen(1);
  const Generator::State before = gen.state();
  CHECK_THROWS_WITH(model.sample_decode(src, kBos, kEos, 8, SamplingOptions{-0.5, 0}, gen),
                    Catch::Contains("sampling: temperature must be a finite number >= 0 (0: greedy), but is -0.5"));
  CHECK_THROWS_WITH(model.sample_decode(src, kBos, kEos, 8, SamplingOptions{1.0, -1}, gen),
                    Catch::Contains("top_k must be >= 0"));
  CHECK_THROWS_WITH(model.sample_decode(src, kBos, kEos, 0, SamplingOptions{}, gen),
                    Catch::Contains("sample_decode: max_new_tokens 0 must be in [1, max_len − 1 = 9]"));
  CHECK_THROWS_WITH(model.sample_decode(src, kBos, kEos, 10, SamplingOptions{}, gen),
                    Catch::Contains("max_new_tokens 10"));
  CHECK_THROWS_WITH(model.sample_decode(src.select(0, 0), kBos, kEos, 8, SamplingOptions{}, gen),
                    Catch::Contains("sample_decode: source ids must be [B, S]"));
  CHECK_THROWS_WITH(model.sample_decode(src, kVocab, kEos, 8, SamplingOptions{}, gen),
                    Catch::Contains("bos_id 13 and eos_id 2 must be target ids in [0, 13)"));
  CHECK_THROWS_WITH(model.greedy_decode(src, kBos, -1, 8), Catch::Contains("greedy_decode: bos_id 1 and eos_id -1"));
  CHECK(gen.state() == before);
}
