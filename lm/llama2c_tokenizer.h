// llama2c_tokenizer.h — llama2.c's tokenizer file (tokenizer.bin, tok512.bin, …) and the TextCodec
// that encodes and decodes exactly as llama2.c's run.c does, so that a llama2.c model imported with
// `tapegrad import llama2c` generates the same text under `tapegrad generate`.
//
//   auto codec = lm::make_llama2c_codec("tok512.bin", 512);
//   codec->encode_prompt("Once upon a time");   // {1, 403, 407, 261, 378}
//
// File (little-endian): int32 max_token_length, then for each of the vocab_size tokens (a number the
// file does not hold: the model gives it) float32 score, int32 length, `length` bytes. Ids 0, 1, 2 are
// <unk>, <s> (BOS), </s>; ids 3..258 the byte-fallback pieces "<0x00>".."<0xFF>". Validated: every
// length within the file, no bytes left after the last token, vocab_size ≥ 259; else tapegrad::Error
// naming the file, the token and the offset.
//
// run.c's rules, as implemented here:
//   encode: BOS (1); when the text is non-empty, the id of the piece " " (SentencePiece's dummy prefix);
//     then each UTF-8 character (a byte and the continuation bytes after it, 4 bytes at most) as the id
//     of the piece equal to it, or, when there is none, each of its bytes b as id b + 3; then, while any
//     adjacent pair of ids (BOS included) concatenates to a piece, the pair whose piece has the HIGHEST
//     score (the leftmost on a tie; scores ≤ −1e10 never merge) is replaced by that piece's id.
//     (When two pieces are equal, the lowest id is used; run.c's binary search picks either.)
//     encode_reference does exactly that, rescanning every pair after each merge (O(n²) per text: 0.04–0.1 MB/s);
//     encode gives the same ids fast (lm/llama2c_encode.h: a pair table, cuts no merge can cross, a cache of
//     the pieces between cuts, a heap for long ones).
//   decode(prev, id): the piece, without its leading space when prev is BOS; a piece "<0xHH>" is the
//     single raw byte 0xHH. (run.c's safe_printf then drops unprintable single bytes when printing;
//     we return the bytes as they are.)
//   stop: run.c's generate loop ends when it SAMPLES BOS (1), not EOS (2): stop_token() is 1.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lm/llama2c_encode.h"
#include "lm/text_codec.h"

namespace tapegrad::lm {

class Llama2cTokenizer {
 public:
  static constexpr uint32_t kBos = 1, kEos = 2;
  // Reads `path` holding `vocab_size` tokens (validated as above).
  Llama2cTokenizer(const std::string& path, size_t vocab_size);

  // The number of tokens a tokenizer file holds (the file does not store it: the pieces are counted to
  // its end); tapegrad::Error naming the file and offset when a length runs past the end.
  static size_t count_tokens(const std::string& path);

  // The ids of `text`, BOS first when `bos` (a fresh cache per call).
  std::vector<uint32_t> encode(std::string_view text, bool bos = true) const;
  // The same ids appended to `out`, with a cache kept between calls (one per thread: encode is const and
  // thread-safe, a cache is not).
  void encode(std::string_view text, bool bos, std::vector<uint32_t>& out, Llama2cEncodeCache& cache) const;
  // run.c's own loop (the rule above, O(n²)): the reference the tests and the fuzz target hold encode to.
  std::vector<uint32_t> encode_reference(std::string_view text, bool bos = true) const;
  std::string decode(uint32_t prev, uint32_t id) const;

  size_t vocab_size() const { return pieces_.size(); }
  const std::string& piece(uint32_t id) const { return pieces_.at(id); }
  float score(uint32_t id) const { return scores_.at(id); }

 private:
  int64_t lookup(const std::string& s) const;  // −1 when no piece equals s

  std::string path_;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, uint32_t> index_;  // piece → lowest id holding it
  int64_t space_ = -1;                               // the piece " " (the dummy prefix), −1 when none
  std::unique_ptr<const Llama2cEncoder> encoder_;
};

std::unique_ptr<TextCodec> make_llama2c_codec(const std::string& tokenizer_path, size_t vocab_size);

}  // namespace tapegrad::lm
