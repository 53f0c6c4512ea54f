// test_data_tokenizer.cpp — GPT-2 vocab.json/merges.txt loading, encode against tiktoken's ids,
// decode round trips on every shared corpus, save/load round trip, and bad input files.
#include <chrono>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "data/bpe_trainer.h"
#include "data/gpt2_files.h"
#include "data/tokenizer.h"
#include "kernels/error.h"
#include "test_data_helpers.h"

using namespace tapegrad;
using namespace tapegrad::data;
using namespace tapegrad::data::testing;

namespace {

const BpeModel& gpt2_model() {
  static const BpeModel model = load_gpt2_files(cs336_path("tests/fixtures/gpt2_vocab.json"),
                                                cs336_path("tests/fixtures/gpt2_merges.txt"));
  return model;
}

Tokenizer gpt2_tokenizer(const std::vector<std::string>& special_tokens) {
  BpeModel model = gpt2_model();
  model.special_tokens = special_tokens;
  return Tokenizer(std::move(model));
}

}  // namespace

TEST_CASE("GPT-2 vocab.json and merges.txt load with the expected sizes", "[data][tokenizer]") {
  const BpeModel& model = gpt2_model();
  CHECK(model.vocab.size() == 50257);
  CHECK(model.merges.size() == 50000);
  CHECK(model.vocab[50256] == "<|endoftext|>");
  CHECK(model.vocab[220] == " ");  // 'Ġ'
  CHECK(model.merges[0] == std::pair<std::string, std::string>(" ", "t"));
}

TEST_CASE("encode matches tiktoken GPT-2 ids for every reference case", "[data][tokenizer]") {
  const auto cases = nlohmann::json::parse(read_all(cs336_path("expected/tiktoken_gpt2_ids.json")));
  REQUIRE(cases.size() == 11);
  for (const auto& [name, c] : cases.items()) {
    INFO("case " << name);
    const std::string text = c["text"].is_null() ? read_all(cs336_path(c["source"].get<std::string>()))
                                                 : c["text"].get<std::string>();
    Tokenizer tokenizer = gpt2_tokenizer(c["allowed_special"].get<std::vector<std::string>>());
    const std::vector<uint32_t> ids = tokenizer.encode(text);
    CHECK(ids == c["ids"].get<std::vector<uint32_t>>());
    CHECK(tokenizer.decode(ids) == text);
    CHECK(tokenizer.encode(text) == ids);  // second time through the pretoken cache
  }
}

TEST_CASE("overlapping special tokens match longest first", "[data][tokenizer]") {
  // the double token is not in GPT-2's vocabulary: add it as id 50257
  BpeModel model = gpt2_model();
  model.vocab.push_back("<|endoftext|><|endoftext|>");
  model.special_tokens = {"<|endoftext|>", "<|endoftext|><|endoftext|>"};
  Tokenizer with_double(std::move(model));
  const auto ids = with_double.encode("a<|endoftext|><|endoftext|><|endoftext|>b");
  CHECK(ids == std::vector<uint32_t>{64, 50257, 50256, 65});
  CHECK(with_double.decode(ids) == "a<|endoftext|><|endoftext|><|endoftext|>b");
}

TEST_CASE("decode(encode(x)) is x on every shared corpus", "[data][tokenizer]") {
  Tokenizer tokenizer = gpt2_tokenizer({"<|endoftext|>"});
  for (const char* name : {"tinyshakespeare.txt", "tinystories_train_head2MiB.txt",
                           "tinystories_train_head4M_lowercase.txt"}) {
    const std::string text = read_all(corpora_path(name));
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<uint32_t> ids = tokenizer.encode(text);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    WARN(name << ": " << text.size() << " bytes -> " << ids.size() << " tokens in " << seconds << " s");
    CHECK(tokenizer.decode(ids) == text);
  }
}

TEST_CASE("decode replaces invalid UTF-8 with U+FFFD and rejects ids outside the vocabulary", "[data][tokenizer]") {
  Tokenizer tokenizer = gpt2_tokenizer({});
  // GPT-2 ids 8582, 247, 225 are the three pieces of U+1F643; the first alone is not valid UTF-8
  CHECK(tokenizer.decode({8582, 247, 225}) == "\xF0\x9F\x99\x83");
  CHECK(tokenizer.decode({8582}) == "\xEF\xBF\xBD");
  CHECK(tokenizer.decode_bytes({8582}) == tokenizer.model().vocab[8582]);
  CHECK_THROWS_WITH(tokenizer.decode({15496, 50257}), Catch::Contains("id 50257 at position 1"));
}

TEST_CASE("a trained model saves to GPT-2 files and loads back to the same ids", "[data][tokenizer]") {
  BpeTrainOptions options;
  options.vocab_size = 500;
  options.special_tokens = {"<|endoftext|>"};
  const BpeModel trained = train_bpe(read_all(cs336_path("tests/fixtures/corpus.en")), options);
  ScratchDir dir("gpt2_files");
  save_gpt2_files(trained, dir.file("vocab.json"), dir.file("merges.txt"));
  const BpeModel loaded = load_gpt2_files(dir.file("vocab.json"), dir.file("merges.txt"), {"<|endoftext|>"});
  CHECK(loaded.vocab == trained.vocab);
  CHECK(loaded.merges == trained.merges);
  const std::string text = read_all(cs336_path("tests/fixtures/tinystories_sample.txt"));
  Tokenizer a{trained}, b{loaded};
  const auto ids = a.encode(text);
  CHECK(ids == b.encode(text));
  CHECK(a.decode(ids) == text);
}

TEST_CASE("the CS336 reference vocab and merges files load", "[data][tokenizer]") {
  const BpeModel model = load_gpt2_files(cs336_path("tests/fixtures/train-bpe-reference-vocab.json"),
                                         cs336_path("tests/fixtures/train-bpe-reference-merges.txt"), {"<|endoftext|>"});
  CHECK(model.vocab.size() == 500);
  CHECK(model.merges.size() == 243);
  CHECK(model.vocab[0] == "<|endoftext|>");
}

TEST_CASE("bad vocab.json and merges.txt files give clear errors", "[data][tokenizer]") {
  ScratchDir dir("bad_gpt2_files");
  const std::string vocab = dir.file("vocab.json"), merges = dir.file("merges.txt");
  // a tiny valid pair of files: the bytes come from the GPT-2 fixture's first 256 ids
  nlohmann::json small = nlohmann::json::object();
  const auto full = nlohmann::json::parse(read_all(cs336_path("tests/fixtures/gpt2_vocab.json")));
  for (const auto& [key, id] : full.items())
    if (id.get<int>() < 256) small[key] = id;
  small["ab"] = 256;
  write_all(vocab, small.dump());
  write_all(merges, "#version: 0.2\na b\n");
  CHECK(load_gpt2_files(vocab, merges).merges.size() == 1);
  write_all(merges, "a b\n");  // no #version line
  CHECK(load_gpt2_files(vocab, merges).merges.size() == 1);

  write_all(merges, "a b\nx yz\n");
  CHECK_THROWS_WITH(load_gpt2_files(vocab, merges), Catch::Contains("line 2") && Catch::Contains("not in"));
  write_all(merges, "a b c\n");
  CHECK_THROWS_WITH(load_gpt2_files(vocab, merges), Catch::Contains("line 1"));
  write_all(merges, "a b\n");
  write_all(vocab, "this is not json");
  CHECK_THROWS_WITH(load_gpt2_files(vocab, merges), Catch::Contains("not valid JSON"));
  write_all(vocab, "[1, 2]");
  CHECK_THROWS_WITH(load_gpt2_files(vocab, merges), Catch::Contains("JSON object"));
  write_all(vocab, R"({"a": 0, "b": 0})");
  CHECK_THROWS_WITH(load_gpt2_files(vocab, merges), Catch::Contains("used twice"));
  write_all(vocab, R"({"a": 0, "b": 5})");
  CHECK_THROWS_WITH(load_gpt2_files(vocab, merges), Catch::Contains("outside"));
  write_all(vocab, R"({"a": 0, "\u4e2d": 1})");
  CHECK_THROWS_WITH(load_gpt2_files(vocab, merges), Catch::Contains("GPT-2 byte alphabet"));
  CHECK_THROWS_WITH(load_gpt2_files(dir.file("missing.json"), merges), Catch::Contains("cannot open"));
  // a vocabulary without every single byte cannot encode
  write_all(vocab, R"({"a": 0, "b": 1, "ab": 2})");
  CHECK_THROWS_WITH(Tokenizer(load_gpt2_files(vocab, merges)), Catch::Contains("no single-byte token"));
}
