// llama2c_tokenizer.cpp — llama2.c's tokenizer file and run.c's encode/decode rules (see the header).
#include "lm/llama2c_tokenizer.h"

#include <algorithm>
#include <cstring>

#include "data/file_io.h"
#include "kernels/error.h"

namespace tapegrad::lm {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

}  // namespace

Llama2cTokenizer::Llama2cTokenizer(const std::string& path, size_t vocab_size) : path_(path) {
  TG_CHECK(vocab_size >= 259 && vocab_size <= (size_t(1) << 22),
           "llama2c tokenizer '{}': vocabulary size {} must be in [259, 2^22] (3 specials + 256 byte pieces)", path,
           vocab_size);
  const std::string bytes = data::read_whole_file(path, "llama2c tokenizer");
  size_t at = 0;
  auto read_i32 = [&](const char* what, size_t token) {
    TG_CHECK(bytes.size() - at >= 4, "llama2c tokenizer '{}' is truncated: {} of token {} at offset {} (file: {} bytes)",
             path, what, token, at, bytes.size());
    int32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    at += 4;
    return v;
  };
  TG_CHECK(bytes.size() >= 4, "llama2c tokenizer '{}' is {} bytes: shorter than its 4-byte header", path, bytes.size());
  const int32_t max_len = read_i32("max_token_length", 0);
  TG_CHECK(max_len >= 0, "llama2c tokenizer '{}': max_token_length (offset 0) is {}", path, max_len);
  pieces_.reserve(vocab_size);
  scores_.reserve(vocab_size);
  for (size_t i = 0; i < vocab_size; ++i) {
    const int32_t raw_score = read_i32("the score", i);
    float score;
    std::memcpy(&score, &raw_score, 4);
    const size_t len_at = at;
    const int32_t len = read_i32("the length", i);
    TG_CHECK(len >= 0 && size_t(len) <= bytes.size() - at,
             "llama2c tokenizer '{}': token {} has length {} (offset {}) but {} bytes remain: truncated or not a "
             "tokenizer of {} tokens",
             path, i, len, len_at, bytes.size() - at, vocab_size);
    pieces_.emplace_back(bytes.data() + at, size_t(len));
    scores_.push_back(score);
    at += size_t(len);
    index_.emplace(pieces_.back(), uint32_t(i));  // keeps the first (lowest) id of equal pieces
  }
  TG_CHECK(at == bytes.size(),
           "llama2c tokenizer '{}': {} bytes remain after token {} (offset {}): the file holds more tokens than the "
           "model's {}? (another tokenizer)",
           path, bytes.size() - at, vocab_size - 1, at, vocab_size);
  space_ = lookup(" ");
  encoder_ = std::make_unique<const Llama2cEncoder>(pieces_, scores_);
}

size_t Llama2cTokenizer::count_tokens(const std::string& path) {
  const std::string bytes = data::read_whole_file(path, "llama2c tokenizer");
  TG_CHECK(bytes.size() >= 4, "llama2c tokenizer '{}' is {} bytes: shorter than its 4-byte header", path, bytes.size());
  size_t at = 4, n = 0;
  while (at < bytes.size()) {
    TG_CHECK(bytes.size() - at >= 8, "llama2c tokenizer '{}' is truncated: token {} at offset {} needs 8 bytes, {} remain",
             path, n, at, bytes.size() - at);
    int32_t len;
    std::memcpy(&len, bytes.data() + at + 4, 4);
    TG_CHECK(len >= 0 && size_t(len) <= bytes.size() - at - 8,
             "llama2c tokenizer '{}': token {} has length {} (offset {}) but {} bytes remain", path, n, len, at + 4,
             bytes.size() - at - 8);
    at += 8 + size_t(len);
    ++n;
  }
  return n;
}

int64_t Llama2cTokenizer::lookup(const std::string& s) const {
  const auto it = index_.find(s);
  return it == index_.end() ? -1 : int64_t(it->second);
}

std::vector<uint32_t> Llama2cTokenizer::encode(std::string_view text, bool bos) const {
  std::vector<uint32_t> ids;
  Llama2cEncodeCache cache;
  encode(text, bos, ids, cache);
  return ids;
}

void Llama2cTokenizer::encode(std::string_view text, bool bos, std::vector<uint32_t>& out,
                              Llama2cEncodeCache& cache) const {
  TG_CHECK(text.empty() || space_ >= 0, "llama2c tokenizer '{}' has no piece \" \" (the dummy prefix)", path_);
  encoder_->encode(text, bos, uint32_t(std::max<int64_t>(space_, 0)), out, cache);
}

std::vector<uint32_t> Llama2cTokenizer::encode_reference(std::string_view text, bool bos) const {
  std::vector<uint32_t> ids;
  if (bos) ids.push_back(kBos);
  if (!text.empty()) {
    TG_CHECK(space_ >= 0, "llama2c tokenizer '{}' has no piece \" \" (the dummy prefix)", path_);
    ids.push_back(uint32_t(space_));
  }
  // Characters: a byte and the continuation bytes after it, at most 4 bytes in all (as run.c groups them).
  for (size_t i = 0; i < text.size();) {
    size_t n = 1;
    while (i + n < text.size() && n < 4 && is_continuation(static_cast<unsigned char>(text[i + n]))) ++n;
    const std::string ch(text.substr(i, n));
    const int64_t id = lookup(ch);
    if (id >= 0) {
      ids.push_back(uint32_t(id));
    } else {
      for (unsigned char b : ch) ids.push_back(uint32_t(b) + 3);  // byte fallback: ids 3..258
    }
    i += n;
  }
  // Merges: the adjacent pair whose concatenation is the highest-scoring piece, until none is left.
  std::string pair;
  while (ids.size() >= 2) {
    float best_score = -1e10f;
    int64_t best_id = -1;
    size_t best_at = 0;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      pair = pieces_[ids[i]];
      pair += pieces_[ids[i + 1]];
      const int64_t id = lookup(pair);
      if (id >= 0 && scores_[size_t(id)] > best_score) {
        best_score = scores_[size_t(id)];
        best_id = id;
        best_at = i;
      }
    }
    if (best_id < 0) break;
    ids[best_at] = uint32_t(best_id);
    ids.erase(ids.begin() + std::ptrdiff_t(best_at) + 1);
  }
  return ids;
}

std::string Llama2cTokenizer::decode(uint32_t prev, uint32_t id) const {
  TG_CHECK(id < pieces_.size(), "llama2c tokenizer '{}': token id {} is outside the vocabulary of {}", path_, id,
           pieces_.size());
  std::string_view piece = pieces_[id];
  if (prev == kBos && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
  if (piece.size() == 6 && piece.substr(0, 3) == "<0x" && piece[5] == '>') {
    const int hi = hex_value(piece[3]), lo = hex_value(piece[4]);
    if (hi >= 0 && lo >= 0) return std::string(1, char(hi * 16 + lo));
  }
  return std::string(piece);
}

namespace {

class Llama2cCodec final : public TextCodec {
 public:
  Llama2cCodec(const std::string& path, size_t vocab_size) : tok_(path, vocab_size) {}
  std::vector<uint32_t> encode_prompt(std::string_view text) override { return tok_.encode(text, true); }
  std::vector<uint32_t> encode_text(std::string_view text) override { return tok_.encode(text, false); }
  std::string decode_token(uint32_t prev, uint32_t id) override { return tok_.decode(prev, id); }
  bool pieces_carry_leading_space() const override { return true; }
  // run.c ends generation when it samples BOS (a new sequence would begin), not at EOS.
  std::optional<uint32_t> stop_token() const override { return Llama2cTokenizer::kBos; }
  size_t vocab_size() const override { return tok_.vocab_size(); }
  std::string kind() const override { return "llama2c"; }

 private:
  Llama2cTokenizer tok_;
};

}  // namespace

std::unique_ptr<TextCodec> make_llama2c_codec(const std::string& tokenizer_path, size_t vocab_size) {
  return std::make_unique<Llama2cCodec>(tokenizer_path, vocab_size);
}

}  // namespace tapegrad::lm
