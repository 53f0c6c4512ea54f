// test_data_bpe_train.cpp — BPE training against the CS336 reference (corpus.en, vocab 500),
// id layout, special tokens, tie-breaking, invalid UTF-8, and error messages.
#include <algorithm>
#include <chrono>
#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "data/bpe_trainer.h"
#include "kernels/error.h"
#include "test_data_helpers.h"

using namespace tapegrad;
using namespace tapegrad::data;
using namespace tapegrad::data::testing;

TEST_CASE("train_bpe on corpus.en matches the CS336 reference merges and vocab exactly", "[data][bpe]") {
  const std::string corpus = read_all(cs336_path("tests/fixtures/corpus.en"));
  const auto reference = nlohmann::json::parse(read_all(cs336_path("expected/train_bpe_reference.json")));
  BpeTrainOptions options;
  options.vocab_size = 500;
  options.special_tokens = {"<|endoftext|>"};
  const auto t0 = std::chrono::steady_clock::now();
  const BpeModel model = train_bpe(corpus, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("train_bpe corpus.en vocab 500: " << seconds << " s");

  const auto& merges_hex = reference["merges_hex"];
  REQUIRE(model.merges.size() == merges_hex.size());
  for (size_t i = 0; i < merges_hex.size(); ++i) {
    INFO("merge " << i);
    CHECK(model.merges[i].first == from_hex(merges_hex[i][0].get<std::string>()));
    CHECK(model.merges[i].second == from_hex(merges_hex[i][1].get<std::string>()));
  }
  std::set<std::string> expected_vocab, got_vocab(model.vocab.begin(), model.vocab.end());
  for (const auto& [id, hex] : reference["vocab_hex"].items()) expected_vocab.insert(from_hex(hex.get<std::string>()));
  CHECK(model.vocab.size() == 500);
  CHECK(got_vocab == expected_vocab);
}

TEST_CASE("train_bpe gives the same result with 2 pretokenization threads", "[data][bpe]") {
  const std::string corpus = read_all(corpora_path("tinystories_train_head2MiB.txt")).substr(0, 300000);
  BpeTrainOptions options;
  options.vocab_size = 400;
  options.special_tokens = {"<|endoftext|>"};
  const BpeModel one = train_bpe(corpus, options);
  options.num_threads = 2;
  const BpeModel two = train_bpe(corpus, options);
  CHECK(one.merges == two.merges);
  CHECK(one.vocab == two.vocab);
}

TEST_CASE("train_bpe id order is special tokens then bytes 0..255 then merges", "[data][bpe]") {
  BpeTrainOptions options;
  options.vocab_size = 2 + 256 + 2;
  options.special_tokens = {"<|endoftext|>", "<|pad|>"};
  const BpeModel model = train_bpe("low lower lowest<|pad|>low", options);
  REQUIRE(model.vocab.size() == 260);
  CHECK(model.vocab[0] == "<|endoftext|>");
  CHECK(model.vocab[1] == "<|pad|>");
  for (int b = 0; b < 256; ++b) CHECK(model.vocab[2 + b] == std::string(1, char(b)));
  REQUIRE(model.merges.size() == 2);
  CHECK(model.vocab[258] == model.merges[0].first + model.merges[0].second);
  CHECK(model.vocab[259] == model.merges[1].first + model.merges[1].second);
  // " l"+"o" style: the most frequent pair first ("lo" and "ow" both appear 4 times: "ow" > "lo")
  CHECK(model.merges[0] == std::pair<std::string, std::string>("o", "w"));
}

TEST_CASE("train_bpe never merges across or into special tokens", "[data][bpe]") {
  BpeTrainOptions options;
  options.vocab_size = 1 + 256 + 2;
  options.special_tokens = {"<|endoftext|>"};
  const BpeModel model = train_bpe("ab<|endoftext|>ab<|endoftext|>ab<|endoftext|>cd", options);
  for (const auto& [left, right] : model.merges) {
    CHECK((left + right).find('<') == std::string::npos);
    CHECK((left + right).find('|') == std::string::npos);
  }
  CHECK(model.merges[0] == std::pair<std::string, std::string>("a", "b"));
}

TEST_CASE("train_bpe ties go to the lexicographically greatest pair of byte strings", "[data][bpe]") {
  BpeTrainOptions options;
  options.vocab_size = 256 + 1;
  // every pair occurs once; bytes compare unsigned, so (0xc3, 0xa9) from "é" is the greatest
  CHECK(train_bpe("ab \xc3\xa9", options).merges[0] == std::pair<std::string, std::string>("\xc3", "\xa9"));
  CHECK(train_bpe("ab cd", options).merges[0] == std::pair<std::string, std::string>("c", "d"));
}

TEST_CASE("train_bpe handles invalid UTF-8 as bytes", "[data][bpe]") {
  BpeTrainOptions options;
  options.vocab_size = 256 + 2;
  const std::string text = "\xff\xfe\xff\xfe abc \xc3\x28 \xff\xfe";
  BpeModel model;
  REQUIRE_NOTHROW(model = train_bpe(text, options));
  CHECK(model.merges[0] == std::pair<std::string, std::string>("\xff", "\xfe"));
}

TEST_CASE("train_bpe rejects empty text, a too-small vocab and too many merges with clear errors", "[data][bpe]") {
  BpeTrainOptions options;
  options.vocab_size = 300;
  CHECK_THROWS_WITH(train_bpe("", options), Catch::Contains("empty"));
  CHECK_THROWS_WITH(train_bpe("ab ab", options), Catch::Contains("only 2 merges are possible"));
  options.vocab_size = 100;
  CHECK_THROWS_WITH(train_bpe("ab", options), Catch::Contains("smaller than"));
  options.vocab_size = 256;
  CHECK(train_bpe("", options).vocab.size() == 256);
  CHECK_THROWS_AS(train_bpe_file("/nonexistent/corpus.txt", options), Error);
}
