// bits_per_byte.cpp — the byte length of every token of a tokenizer, and bits per byte (see the header).
#include "lm/bits_per_byte.h"

#include <algorithm>
#include <numbers>
#include <set>
#include <string>

namespace tapegrad::lm {

TokenByteLengths token_byte_lengths(const data::BpeModel& tokenizer, size_t vocab_size) {
  const std::set<std::string> special(tokenizer.special_tokens.begin(), tokenizer.special_tokens.end());
  TokenByteLengths out(std::max(vocab_size, tokenizer.vocab.size()), 0);
  for (size_t id = 0; id < tokenizer.vocab.size(); ++id)
    if (!special.contains(tokenizer.vocab[id])) out[id] = uint32_t(tokenizer.vocab[id].size());
  return out;
}

TokenByteLengths token_byte_lengths(const Llama2cTokenizer& tokenizer, size_t vocab_size) {
  TokenByteLengths out(std::max(vocab_size, tokenizer.vocab_size()), 0);
  for (uint32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const std::string& p = tokenizer.piece(id);
    const bool control = id <= Llama2cTokenizer::kEos;  // <unk>, <s>, </s>
    const bool byte_fallback = p.size() == 6 && p.starts_with("<0x") && p.ends_with(">");
    out[id] = control ? 0 : byte_fallback ? 1 : uint32_t(p.size());
  }
  return out;
}

double bits_per_byte(double nats_total, uint64_t bytes) {
  return bytes == 0 ? 0.0 : nats_total / double(bytes) / std::numbers::ln2;
}

}  // namespace tapegrad::lm
