// test_data_stream_train.cpp — the cut rule (cut_finder.h) checked against the splitter + PCRE2 on
// random texts, and streamed training (train_bpe_file with tiny blocks) against in-memory training.
#include <map>
#include <random>

#include <catch2/catch.hpp>

#include "data/bpe_trainer.h"
#include "data/cut_finder.h"
#include "data/pretoken_counts.h"
#include "data/pretokenizer.h"
#include "data/special_splitter.h"
#include "test_data_helpers.h"

using namespace tapegrad::data;
using namespace tapegrad::data::testing;

namespace {

// Special tokens as "\x01<index>" followed by the pretokens, in text order.
std::vector<std::string> pieces_of(std::string_view text, const std::vector<std::string>& specials) {
  static const Pretokenizer pretokenizer;
  std::vector<std::string> out;
  SpecialSplitter(specials).split(
      text, [&](std::string_view piece) { pretokenizer.split(piece, [&](std::string_view p) { out.emplace_back(p); }); },
      [&](size_t index) {
        std::string marker(1, '\x01');
        marker += std::to_string(index);
        out.push_back(std::move(marker));
      });
  return out;
}

std::string random_text(std::mt19937& rng, size_t fragments) {
  static const std::vector<std::string> alphabet = {
      "a", "Z", "7", ".", "'s", "'", " ", "  ", "\n", "\n", "\n", "\r\n", "\t", "<|endoftext|>", "<|endoftext|>",
      "<|end", "oftext|>", "<|", "|>", "\xc3\xa9", "\xc2\xa0", "\xe3\x80\x80", "\xff", "\xc3", "x\n", "\ny"};
  std::string text;
  for (size_t i = 0; i < fragments; ++i) text += alphabet[rng() % alphabet.size()];
  return text;
}

template <class Map>
std::map<std::string, int64_t> sorted(const Map& counts) {
  std::map<std::string, int64_t> out;
  for (const auto& [k, v] : counts) out[k] = v;
  return out;
}

}  // namespace

TEST_CASE("every cut that CutFinder allows splits text exactly as the whole text splits", "[data][stream_train]") {
  const std::vector<std::vector<std::string>> special_sets = {
      {}, {"<|endoftext|>"}, {"<|endoftext|>", "<|endoftext|><|endoftext|>"}, {"\n", "<|"},
      {"<|", "|>", "<|endoftext|>"}};
  std::mt19937 rng(1234);
  size_t cuts_checked = 0;
  for (const auto& specials : special_sets) {
    const CutFinder finder(specials);
    for (int trial = 0; trial < 300; ++trial) {
      const std::string text = random_text(rng, 30);
      const auto whole = pieces_of(text, specials);
      for (size_t p = 0; p <= text.size(); ++p) {
        if (!finder.is_cut(text, p)) continue;
        ++cuts_checked;
        auto left = pieces_of(std::string_view(text).substr(0, p), specials);
        const auto right = pieces_of(std::string_view(text).substr(p), specials);
        left.insert(left.end(), right.begin(), right.end());
        INFO("text \"" << text << "\" cut at " << p);
        REQUIRE(left == whole);
      }
      // a cut found in a prefix (as when streaming) is a cut of the whole text
      for (size_t k = 0; k <= text.size(); ++k) {
        const size_t p = finder.last_cut(std::string_view(text).substr(0, k));
        if (p == 0) continue;
        INFO("text \"" << text << "\" prefix " << k << " cut at " << p);
        REQUIRE(finder.is_cut(text, p));
      }
    }
  }
  CHECK(cuts_checked > 1000);  // the rule is not vacuous
  // the unsafe cases the rule must refuse
  const CutFinder plain({});
  CHECK_FALSE(plain.is_cut("ab  \ncd", 5));   // "  " + "\n" in the whole text, "  \n" at the end of a block
  CHECK_FALSE(plain.is_cut("ab\r\ncd", 4));
  CHECK_FALSE(plain.is_cut("ab\n cd", 3));    // " cd" would lose its space
  CHECK(plain.is_cut("ab\ncd", 3));
}

TEST_CASE("count_pretokens_in_file with tiny blocks counts exactly what count_pretokens counts", "[data][stream_train]") {
  const std::string text = read_all(corpora_path("tinyshakespeare.txt")).substr(0, 200000);
  ScratchDir dir("stream_counts");
  write_all(dir.file("t.txt"), text);
  const std::vector<std::string> specials = {"<|endoftext|>"};
  const auto expected = sorted(count_pretokens(text, specials, 1));
  CHECK(sorted(count_pretokens(text, specials, 3)) == expected);
  for (size_t block : {size_t(1), size_t(13), size_t(4096)}) {
    for (int threads : {1, 2}) {
      INFO("block " << block << " threads " << threads);
      CHECK(sorted(count_pretokens_in_file(dir.file("t.txt"), specials, threads, block)) == expected);
    }
  }
}

TEST_CASE("train_bpe_file with tiny blocks gives the merges of in-memory training on a shared corpus", "[data][stream_train]") {
  const std::string path = corpora_path("tinystories_train_head2MiB.txt");
  const std::string text = read_all(path);
  BpeTrainOptions options;
  options.vocab_size = 1000;
  options.special_tokens = {"<|endoftext|>"};
  const BpeModel in_memory = train_bpe(text, options);
  for (size_t block : {size_t(4096), size_t(100000)}) {
    for (int threads : {1, 2}) {
      INFO("block " << block << " threads " << threads);
      options.file_block_bytes = block;
      options.num_threads = threads;
      const BpeModel streamed = train_bpe_file(path, options);
      CHECK(streamed.merges == in_memory.merges);
      CHECK(streamed.vocab == in_memory.vocab);
    }
  }
}

TEST_CASE("train_bpe_file with special tokens across every block boundary matches in-memory training", "[data][stream_train]") {
  // special tokens and newlines placed so that block ends fall inside, right before and right after them
  std::mt19937 rng(99);
  std::string text;
  const std::vector<std::string> words = {"low", " lower", " newest", " widest", "\n", ".", " the", "  ", "!\n"};
  for (int i = 0; i < 600; ++i) {
    text += words[rng() % words.size()];
    if (rng() % 4 == 0) text += "<|endoftext|>";
    if (rng() % 9 == 0) text += "<|endoftext|><|endoftext|>";
  }
  ScratchDir dir("stream_train");
  write_all(dir.file("s.txt"), text);
  for (const auto& specials :
       std::vector<std::vector<std::string>>{{"<|endoftext|>"}, {"<|endoftext|>", "<|endoftext|><|endoftext|>"}}) {
    BpeTrainOptions options;
    options.vocab_size = specials.size() + 256 + 30;
    options.special_tokens = specials;
    const BpeModel in_memory = train_bpe(text, options);
    for (size_t block = 1; block <= 40; ++block) {
      INFO("specials " << specials.size() << " block " << block);
      options.file_block_bytes = block;
      options.num_threads = 1 + int(block % 2);
      const BpeModel streamed = train_bpe_file(dir.file("s.txt"), options);
      REQUIRE(streamed.merges == in_memory.merges);
      CHECK(streamed.vocab == in_memory.vocab);
    }
  }
  BpeTrainOptions options;
  options.vocab_size = 300;
  write_all(dir.file("empty.txt"), "");
  CHECK_THROWS_WITH(train_bpe_file(dir.file("empty.txt"), options), Catch::Contains("empty"));
  options.file_block_bytes = 0;
  CHECK_THROWS_AS(train_bpe_file(dir.file("s.txt"), options), tapegrad::Error);
}
