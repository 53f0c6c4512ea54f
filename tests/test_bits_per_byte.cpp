// test_bits_per_byte.cpp — validation loss in bits per byte (lm/bits_per_byte.h): each token's byte length
// (BPE entries, special tokens 0, llama2.c pieces with byte fallback), evaluate() counting the bytes of exactly
// the predicted tokens, the Trainer and metrics.jsonl reporting it.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <random>
#include <span>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "lm/bits_per_byte.h"
#include "lm/evaluate.h"
#include "lm/metrics_log.h"
#include "lm/trainer.h"
#include "tests/shared_fixture.h"

using namespace tapegrad;

namespace {

nn::TransformerLMConfig config(int64_t vocab) {
  nn::TransformerLMConfig c;
  c.vocab_size = vocab;
  c.context_length = 8;
  c.d_model = 16;
  c.n_layers = 1;
  c.n_heads = 2;
  return c;
}

std::vector<uint32_t> random_ids(size_t n, uint32_t vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> v(n);
  for (uint32_t& x : v) x = rng() % vocab;
  return v;
}

}  // namespace

TEST_CASE("token_byte_lengths: a BPE entry's bytes, 0 for special and appended tokens", "[lm][bpb]") {
  data::BpeModel bpe;
  for (int b = 0; b < 256; ++b) bpe.vocab.push_back(std::string(1, char(b)));
  bpe.vocab.push_back(" the");
  bpe.vocab.push_back("<|endoftext|>");
  bpe.special_tokens = {"<|endoftext|>"};
  const lm::TokenByteLengths l = lm::token_byte_lengths(bpe, 260);  // two chat tokens appended
  REQUIRE(l.size() == 260);
  CHECK(l[65] == 1);
  CHECK(l[256] == 4);
  CHECK(l[257] == 0);
  CHECK(l[258] == 0);
  CHECK(l[259] == 0);
  CHECK(lm::bits_per_byte(std::log(2.0) * 10, 10) == Approx(1.0).epsilon(1e-15));
  CHECK(lm::bits_per_byte(5.0, 0) == 0.0);
}

TEST_CASE("token_byte_lengths of llama2.c's tokenizer: control pieces 0, byte fallback 1", "[lm][bpb]") {
  const lm::Llama2cTokenizer tok(testing::shared_path("data/llama2c/tok512.bin"), 512);
  const lm::TokenByteLengths l = lm::token_byte_lengths(tok);
  REQUIRE(l.size() == 512);
  CHECK(l[0] == 0);  // <unk>
  CHECK(l[1] == 0);  // <s>
  CHECK(l[2] == 0);  // </s>
  CHECK(tok.piece(3 + 'A') == "<0x41>");
  CHECK(l[3 + 'A'] == 1);
  for (uint32_t id = 259; id < 512; ++id) CHECK(l[id] == tok.piece(id).size());
}

TEST_CASE("evaluate counts the bytes of exactly the predicted tokens: bits/byte = nats · tokens / bytes / ln 2",
          "[lm][bpb]") {
  Generator g(4);
  nn::TransformerLM model(config(16), &g);
  const std::vector<uint32_t> ids = random_ids(70, 16, 1);  // (70 − 1) / 8 = 8 windows: targets ids[1 .. 64]
  const data::TokenSource src{std::span<const uint32_t>(ids)};
  std::vector<uint32_t> lengths(16);
  for (uint32_t id = 0; id < 16; ++id) lengths[id] = id % 4;  // 0..3 bytes
  const lm::EvalResult plain = lm::evaluate(model, src, 3);
  CHECK(plain.bytes == 0);
  CHECK(plain.bits_per_byte == 0.0);
  const lm::EvalResult r = lm::evaluate(model, src, 3, 0, &lengths);
  uint64_t bytes = 0;
  for (size_t i = 1; i <= 64; ++i) bytes += lengths[ids[i]];
  CHECK(r.tokens == 64);
  CHECK(r.bytes == bytes);
  CHECK(r.loss == plain.loss);
  CHECK(r.bits_per_byte == Approx(r.loss * 64 / double(bytes) / std::numbers::ln2).epsilon(1e-12));
  // Byte-level text (every token 1 byte): nats per character / ln 2.
  const std::vector<uint32_t> ones(16, 1);
  CHECK(lm::evaluate(model, src, 3, 0, &ones).bits_per_byte == Approx(plain.loss / std::numbers::ln2).epsilon(1e-12));
  const std::vector<uint32_t> short_table(5, 1);
  CHECK_THROWS_WITH(lm::evaluate(model, src, 3, 0, &short_table), Catch::Contains("has no byte length"));
}

TEST_CASE("the Trainer's evaluation counts bytes, a metrics record round-trips val_bpb", "[lm][bpb]") {
  const std::vector<uint32_t> train = random_ids(500, 16, 2), val = random_ids(100, 16, 3);
  lm::TrainOptions o;
  o.batch_size = 2;
  o.steps = 2;
  lm::Trainer t(config(16), o, std::span<const uint32_t>(train), data::TokenSource(std::span<const uint32_t>(val)));
  t.set_token_byte_lengths(std::vector<uint32_t>(16, 2));  // two bytes a token
  const lm::EvalResult r = t.evaluate();
  CHECK(r.bytes == 2 * r.tokens);
  CHECK(r.bits_per_byte == Approx(r.loss / 2 / std::numbers::ln2).epsilon(1e-12));
  lm::MetricRecord m;
  m.kind = lm::MetricRecord::Kind::Eval;
  m.val_loss = r.loss;
  m.val_bpb = r.bits_per_byte;
  const std::string line = lm::to_json_line(m);
  CHECK(line.find("\"val_bpb\"") != std::string::npos);
  CHECK(lm::from_json_line(line).val_bpb == r.bits_per_byte);
  m.val_bpb = 0;  // not known: not written, read back as 0
  CHECK(lm::to_json_line(m).find("val_bpb") == std::string::npos);
  CHECK(lm::from_json_line(lm::to_json_line(m)).val_bpb == 0.0);
}
