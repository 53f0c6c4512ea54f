// test_data_fuzz.cpp — random bytes into the pretokenizer, training, encode/decode and the file
// readers: never a crash, only results or tapegrad::Error.
#include <catch2/catch.hpp>

#include "autograd/generator.h"
#include "data/bpe_trainer.h"
#include "data/gpt2_files.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "data/utf8.h"
#include "kernels/error.h"
#include "test_data_helpers.h"

using namespace tapegrad;
using namespace tapegrad::data;
using namespace tapegrad::data::testing;

namespace {

std::string random_bytes(Generator& gen, size_t max_length) {
  std::string s(gen.below(max_length + 1), '\0');
  // mostly ASCII with some high bytes, so both the regex paths and invalid UTF-8 are exercised
  for (char& c : s) c = char(gen.below(4) == 0 ? gen.below(256) : 0x20 + gen.below(0x60));
  return s;
}

}  // namespace

TEST_CASE("random bytes round-trip through a trained tokenizer", "[data][fuzz]") {
  Generator gen(2024);
  std::string corpus;
  for (int i = 0; i < 200; ++i) corpus += random_bytes(gen, 64) + "<|endoftext|>";
  BpeTrainOptions options;
  options.vocab_size = 1 + 256 + 50;
  options.special_tokens = {"<|endoftext|>"};
  Tokenizer tokenizer(train_bpe(corpus, options));
  for (int i = 0; i < 300; ++i) {
    const std::string text = random_bytes(gen, 200);
    const auto ids = tokenizer.encode(text);
    CHECK(tokenizer.decode_bytes(ids) == text);
    CHECK(tokenizer.decode(ids) == replace_invalid_utf8(text));
  }
  for (int i = 0; i < 300; ++i) {  // random ids: valid ones decode, others throw
    std::vector<uint32_t> ids(gen.below(20));
    for (auto& id : ids) id = uint32_t(gen.below(tokenizer.vocab_size() + 5));
    bool in_range = true;
    for (auto id : ids) in_range = in_range && id < tokenizer.vocab_size();
    if (in_range)
      CHECK_NOTHROW(tokenizer.decode(ids));
    else
      CHECK_THROWS_AS(tokenizer.decode(ids), Error);
  }
}

TEST_CASE("replace_invalid_utf8 follows the maximal-subpart rule", "[data][fuzz]") {
  CHECK(replace_invalid_utf8("a\xff" "b") == "a\xEF\xBF\xBD" "b");
  CHECK(replace_invalid_utf8("\xF0\x9F\x99") == "\xEF\xBF\xBD");          // one truncated sequence
  CHECK(replace_invalid_utf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  CHECK(replace_invalid_utf8("\xC3\xA9") == "\xC3\xA9");
  Generator gen(5);
  for (int i = 0; i < 1000; ++i) {
    const std::string out = replace_invalid_utf8(random_bytes(gen, 50));
    for (size_t j = 0; j < out.size(); j += valid_utf8_sequence_length(out, j)) REQUIRE(valid_utf8_sequence_length(out, j) > 0);
  }
}

TEST_CASE("random bytes into the file readers never crash", "[data][fuzz]") {
  ScratchDir dir("fuzz_files");
  Generator gen(99);
  std::vector<uint32_t> tokens{1, 2, 3, 4, 5, 6, 7, 8};
  write_token_file(dir.file("good.tok"), tokens, 300);
  const std::string good = read_all(dir.file("good.tok"));
  const std::string vocab = dir.file("vocab.json"), merges = dir.file("merges.txt"), tok = dir.file("t.tok");
  write_all(merges, "a b\n");
  for (int i = 0; i < 300; ++i) {
    std::string mutated = good;  // flip a few bytes and maybe cut the file
    for (int k = 0; k < 3; ++k) mutated[gen.below(mutated.size())] = char(gen.below(256));
    if (gen.below(3) == 0) mutated.resize(gen.below(mutated.size() + 1));
    write_all(tok, mutated);
    try {
      const TokenFile file(tok);
      for (uint64_t j = 0; j < file.size(); ++j) REQUIRE(file[j] < file.vocab_size());  // what open promises
    } catch (const Error&) {
    }
    write_all(vocab, random_bytes(gen, 100));
    write_all(merges, random_bytes(gen, 100));
    try {
      (void)load_gpt2_files(vocab, merges);
    } catch (const Error&) {
    }
  }
  SUCCEED("no crash");
}
