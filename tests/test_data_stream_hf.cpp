// test_data_stream_hf.cpp — streaming encode into a token file (same ids as encoding the whole
// text at once) and Hugging Face tokenizer.json loading (a tokenizer.json written here from the
// GPT-2 fixture files must give tiktoken's ids).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "data/byte_unicode.h"
#include "data/gpt2_files.h"
#include "data/stream_encode.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "kernels/error.h"
#include "test_data_helpers.h"

using namespace tapegrad;
using namespace tapegrad::data;
using namespace tapegrad::data::testing;

TEST_CASE("streaming encode into a token file gives the ids of encoding the whole text", "[data][stream]") {
  ScratchDir dir("stream_encode");
  Tokenizer tokenizer(gpt2_model_with_endoftext());
  // 200 KB of TinyStories with <|endoftext|> every ~800 bytes, cut into small blocks so that blocks end
  // inside special tokens, inside UTF-8 characters and inside words
  const std::string text = read_all(corpora_path("tinystories_train_head2MiB.txt")).substr(0, 200000);
  write_all(dir.file("text.txt"), text);
  const std::vector<uint32_t> whole = tokenizer.encode(text);
  for (size_t block : {size_t(7), size_t(1000), size_t(1) << 20}) {
    INFO("block " << block);
    const uint64_t n = encode_file_to_token_file(tokenizer, dir.file("text.txt"), dir.file("text.tok"), block);
    CHECK(n == whole.size());
    CHECK(read_tokens(dir.file("text.tok")) == whole);
  }
  write_all(dir.file("empty.txt"), "");
  CHECK(encode_file_to_token_file(tokenizer, dir.file("empty.txt"), dir.file("empty.tok")) == 0);
  CHECK_THROWS_WITH(encode_file_to_token_file(tokenizer, dir.file("missing.txt"), dir.file("x.tok")),
                    Catch::Contains("cannot open"));
}

TEST_CASE("a Hugging Face tokenizer.json loads and encodes like tiktoken", "[data][hf]") {
  ScratchDir dir("hf_json");
  const BpeModel& gpt2 = gpt2_model_with_endoftext();
  // Write the GPT-2 fixture in tokenizer.json form: "<|endoftext|>" only as an added special token,
  // half the merges as "a b" strings and half as pairs.
  nlohmann::json vocab = nlohmann::json::object(), merges = nlohmann::json::array();
  for (size_t id = 0; id + 1 < gpt2.vocab.size(); ++id) vocab[bytes_to_gpt2_unicode(gpt2.vocab[id])] = id;
  for (size_t i = 0; i < gpt2.merges.size(); ++i) {
    const std::string l = bytes_to_gpt2_unicode(gpt2.merges[i].first), r = bytes_to_gpt2_unicode(gpt2.merges[i].second);
    if (i % 2) merges.push_back(l + " " + r);
    else merges.push_back(nlohmann::json::array({l, r}));
  }
  nlohmann::json json = {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array({{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}})},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  write_all(dir.file("tokenizer.json"), json.dump());
  const BpeModel loaded = load_hf_tokenizer_json(dir.file("tokenizer.json"));
  CHECK(loaded.vocab == gpt2.vocab);
  CHECK(loaded.merges == gpt2.merges);
  CHECK(loaded.special_tokens == std::vector<std::string>{"<|endoftext|>"});

  const auto cases = nlohmann::json::parse(read_all(cs336_path("expected/tiktoken_gpt2_ids.json")));
  const auto& c = cases["tinystories_sample"];
  Tokenizer tokenizer{loaded};
  CHECK(tokenizer.encode(read_all(cs336_path(c["source"].get<std::string>()))) == c["ids"].get<std::vector<uint32_t>>());

  // bad files
  write_all(dir.file("bad.json"), "{\"model\": 3}");
  CHECK_THROWS_WITH(load_hf_tokenizer_json(dir.file("bad.json")), Catch::Contains("no \"model\" object"));
  write_all(dir.file("bad.json"), "{\"model\": {\"type\": \"Unigram\", \"vocab\": {}, \"merges\": []}}");
  CHECK_THROWS_WITH(load_hf_tokenizer_json(dir.file("bad.json")), Catch::Contains("not BPE"));
  write_all(dir.file("bad.json"), R"({"model": {"vocab": {"a": 0, "b": 1}, "merges": ["a c"]}})");
  CHECK_THROWS_WITH(load_hf_tokenizer_json(dir.file("bad.json")), Catch::Contains("merges[0]"));
  write_all(dir.file("bad.json"), R"({"model": {"vocab": {"a": 0}, "merges": []},
      "added_tokens": [{"id": 3, "content": "<s>", "special": true}]})");
  CHECK_THROWS_WITH(load_hf_tokenizer_json(dir.file("bad.json")), Catch::Contains("outside"));
  write_all(dir.file("bad.json"), "{");
  CHECK_THROWS_WITH(load_hf_tokenizer_json(dir.file("bad.json")), Catch::Contains("not valid JSON"));
}

TEST_CASE("encode_parallel gives the ids of encode", "[data][stream]") {
  Tokenizer tokenizer(gpt2_model_with_endoftext());
  const std::string text = read_all(corpora_path("tinystories_train_head2MiB.txt"));
  const std::vector<uint32_t> serial = tokenizer.encode(text);
  for (int threads : {1, 2, 3, 8}) {
    INFO("threads " << threads);
    CHECK(tokenizer.encode_parallel(text, threads) == serial);
  }
  CHECK(tokenizer.encode_parallel("no special tokens here", 4) == tokenizer.encode("no special tokens here"));
  CHECK(tokenizer.encode_parallel("", 2).empty());
  CHECK_THROWS_AS(tokenizer.encode_parallel("x", 0), Error);
}
