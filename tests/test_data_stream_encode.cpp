// test_data_stream_encode.cpp — encode_file_to_token_file reads through CutFileReader: with tiny
// blocks, on a shared corpus and on synthetic texts with and without special tokens (also with no
// cut at all), the token file holds exactly tokenizer.encode(whole text), and blocks stay bounded.
#include <algorithm>
#include <random>

#include <catch2/catch.hpp>

#include "data/bpe_trainer.h"
#include "data/file_blocks.h"
#include "data/gpt2_files.h"
#include "data/stream_encode.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "test_data_helpers.h"

using namespace tapegrad::data;
using namespace tapegrad::data::testing;

namespace {

// Writes `text`, stream-encodes it with each block size and checks the ids against encode(text).
void check_stream_encode(Tokenizer& tokenizer, const std::string& text, const std::vector<size_t>& blocks,
                         const ScratchDir& dir) {
  write_all(dir.file("in.txt"), text);
  const std::vector<uint32_t> whole = tokenizer.encode(text);
  for (size_t block : blocks) {
    INFO("block " << block << ", text bytes " << text.size());
    const uint64_t n = encode_file_to_token_file(tokenizer, dir.file("in.txt"), dir.file("out.tok"), block);
    CHECK(n == whole.size());
    REQUIRE(read_tokens(dir.file("out.tok")) == whole);
  }
}

// The largest block CutFileReader hands out for `path`.
size_t largest_block(const std::string& path, const std::vector<std::string>& specials, size_t block_bytes) {
  CutFileReader reader(path, specials, block_bytes);
  std::string block;
  size_t largest = 0;
  while (reader.next(block)) largest = std::max(largest, block.size());
  return largest;
}

std::string random_text(std::mt19937& rng, size_t fragments, bool with_specials) {
  static const std::vector<std::string> plain = {
      "a", "Z", "7", ".", "'s", "'", " ", "  ", "\n", "\n", "\n", "\r\n", "\t", " the", " hello", "<|end",
      "oftext|>", "<|", "|>", "\xc3\xa9", "\xc2\xa0", "\xe3\x80\x80", "\xff", "\xc3", "x\n", "\ny", "!\n"};
  std::string text;
  for (size_t i = 0; i < fragments; ++i) {
    text += plain[rng() % plain.size()];
    if (with_specials && rng() % 6 == 0) text += rng() % 3 == 0 ? "<|endoftext|><|endoftext|>" : "<|endoftext|>";
  }
  return text;
}

}  // namespace

TEST_CASE("stream encode of a shared corpus with tiny blocks gives the ids of encode", "[data][stream_encode]") {
  ScratchDir dir("stream_encode_corpus");
  Tokenizer tokenizer(gpt2_model_with_endoftext());
  // Shakespeare has no special token: every cut is a newline between ASCII graphic characters
  const std::string text = read_all(corpora_path("tinyshakespeare.txt")).substr(0, 120000);
  check_stream_encode(tokenizer, text, {1, 2, 5, 13, 64, 4096, size_t(1) << 20}, dir);
  // TinyStories has <|endoftext|> between stories
  const std::string stories = read_all(corpora_path("tinystories_train_head2MiB.txt")).substr(0, 120000);
  check_stream_encode(tokenizer, stories, {1, 3, 11, 500}, dir);
}

TEST_CASE("stream encode of random texts with and without special tokens gives the ids of encode", "[data][stream_encode]") {
  ScratchDir dir("stream_encode_random");
  std::mt19937 rng(7);
  for (bool with_specials : {false, true}) {
    const std::string train_text = random_text(rng, 3000, with_specials);
    for (const auto& specials : std::vector<std::vector<std::string>>{
             {}, {"<|endoftext|>"}, {"<|endoftext|>", "<|endoftext|><|endoftext|>"}, {"<|", "|>", "<|endoftext|>"}}) {
      BpeTrainOptions options;
      options.vocab_size = specials.size() + 256 + 40;
      options.special_tokens = specials;
      Tokenizer tokenizer(train_bpe(train_text, options));
      for (int trial = 0; trial < 4; ++trial) {
        INFO("with specials " << with_specials << ", special set of " << specials.size() << ", trial " << trial);
        const std::string text = random_text(rng, 200 + 150 * size_t(trial), with_specials);
        std::vector<size_t> blocks;
        for (size_t b = 1; b <= 24; ++b) blocks.push_back(b);
        blocks.push_back(1000);
        check_stream_encode(tokenizer, text, blocks, dir);
      }
    }
  }
}

TEST_CASE("stream encode of many lines without special tokens keeps blocks small and the ids of encode", "[data][stream_encode]") {
  ScratchDir dir("stream_encode_lines");
  std::mt19937 rng(11);
  static const std::vector<std::string> words = {"the", "cat", "sat", "on", "a", "mat", "quickly", "7", "don't"};
  std::string text;
  for (int line = 0; line < 4000; ++line) {  // every line starts with a letter and ends with '.' or '!'
    text += "Line";
    for (unsigned w = rng() % 6; w > 0; --w) text += " " + words[rng() % words.size()];
    text += rng() % 2 ? ".\n" : "!\n";
  }
  Tokenizer gpt2(gpt2_model_with_endoftext());
  check_stream_encode(gpt2, text, {1, 7, 32, 64, 1000}, dir);
  BpeModel no_specials = gpt2_model_with_endoftext();
  no_specials.special_tokens.clear();
  Tokenizer plain(std::move(no_specials));
  check_stream_encode(plain, text, {1, 7, 64}, dir);
  // Lines are at most 46 bytes, so each 64-byte read holds a cut: a block is at most the carry
  // (under one read plus the lookahead) plus one read, never the whole file.
  REQUIRE(text.size() > 50000);
  const size_t lookahead = std::string("<|endoftext|>").size();
  CHECK(largest_block(dir.file("in.txt"), {"<|endoftext|>"}, 64) <= 2 * 64 + lookahead);
  CHECK(largest_block(dir.file("in.txt"), {}, 64) <= 2 * 64 + 1);
}

TEST_CASE("stream encode of a text with no cut grows the block and still gives the ids of encode", "[data][stream_encode]") {
  ScratchDir dir("stream_encode_nocut");
  Tokenizer tokenizer(gpt2_model_with_endoftext());
  // one line of words and spaces, newlines only next to spaces: no position is a cut
  std::string text;
  for (int i = 0; i < 3000; ++i) text += i % 50 == 49 ? " \n " : " word";
  check_stream_encode(tokenizer, text, {1, 4, 64}, dir);
  CHECK(largest_block(dir.file("in.txt"), {"<|endoftext|>"}, 64) == text.size());
  // a special token in the middle is the only cut
  const std::string with_one = text + "<|endoftext|>" + text;
  check_stream_encode(tokenizer, with_one, {1, 5, 64}, dir);
  CHECK(largest_block(dir.file("in.txt"), {"<|endoftext|>"}, 64) < with_one.size());
}

TEST_CASE("stream encode rejects a zero block size and a missing file", "[data][stream_encode]") {
  ScratchDir dir("stream_encode_errors");
  Tokenizer tokenizer(gpt2_model_with_endoftext());
  write_all(dir.file("t.txt"), "hello\nworld");
  CHECK_THROWS_WITH(encode_file_to_token_file(tokenizer, dir.file("t.txt"), dir.file("t.tok"), 0),
                    Catch::Contains("block_bytes"));
  CHECK_THROWS_WITH(encode_file_to_token_file(tokenizer, dir.file("missing.txt"), dir.file("m.tok"), 8),
                    Catch::Contains("cannot open"));
  CHECK(!std::filesystem::exists(dir.file("m.tok")));
}
