// tokenizer_checks.h — the property both tokenizer-file targets (gpt2_files, hf_tokenizer_json) check
// on a model their reader accepted: a Tokenizer built from it (or a clean Error, for a model it cannot
// serve) encodes a fixed text into ids of its vocabulary, and decode_bytes gives the text back.
#pragma once
#include <cstdint>
#include <string>

#include "data/bpe_model.h"
#include "data/tokenizer.h"
#include "fuzz_common.h"
#include "kernels/error.h"

namespace tapegrad::fuzz {

inline void check_tokenizer_round_trip(const data::BpeModel& model, const std::string& text) {
  try {
    data::Tokenizer tokenizer(model, 256);
    const auto ids = tokenizer.encode(text);
    for (uint32_t id : ids) FUZZ_ASSERT(id < tokenizer.vocab_size(), "encode gave an id outside the vocabulary");
    FUZZ_ASSERT(tokenizer.decode_bytes(ids) == text, "decode_bytes(encode(text)) != text");
  } catch (const Error&) {
  }
}

}  // namespace tapegrad::fuzz
