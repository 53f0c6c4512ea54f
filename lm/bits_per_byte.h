// bits_per_byte.h — validation loss in bits per byte of text, so that runs with different tokenizers compare
// (a tokenizer with longer tokens has a higher loss per token for the same model quality):
//   bits/byte = (Σ over predicted tokens of −ln p) / (bytes of those tokens' text) / ln 2
//             = loss (nats/token) × tokens / bytes / ln 2
// For byte-level text (one token per byte) it is nats per character / ln 2.
// The bytes of a token are the bytes of its text: a BPE token's vocabulary entry, a llama2.c piece (a
// byte-fallback piece <0xNN> is 1 byte). Special tokens (<|endoftext|>, the chat template's, <s>, </s>, <unk>)
// are not text: 0 bytes (their predictions still count in the loss, as they do in nats per token).
#pragma once
#include <cstdint>
#include <vector>

#include "data/bpe_model.h"
#include "lm/llama2c_tokenizer.h"

namespace tapegrad::lm {

// The byte length of each token id's text, indexed by id (what lm::evaluate counts bytes with).
using TokenByteLengths = std::vector<uint32_t>;

// Ids beyond the tokenizer's (the chat template's appended tokens) can be added with `vocab_size` larger than
// the tokenizer: they count 0 bytes.
TokenByteLengths token_byte_lengths(const data::BpeModel& tokenizer, size_t vocab_size = 0);
TokenByteLengths token_byte_lengths(const Llama2cTokenizer& tokenizer, size_t vocab_size = 0);

// nats_total / bytes / ln 2 (0 when bytes is 0: unknown).
double bits_per_byte(double nats_total, uint64_t bytes);

}  // namespace tapegrad::lm
