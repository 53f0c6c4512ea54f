// stream_encode.h — encodes a text file into a token file without holding either in memory.
//
// The input is read in blocks and cut only right after a special token (e.g. "<|endoftext|>")
// whose match is final, so the ids are exactly those of tokenizer.encode(whole file). Text with no
// special token for a long stretch is buffered until one appears (or the file ends): memory grows
// with the longest run between special tokens.
#pragma once
#include <cstdint>
#include <string>

#include "data/tokenizer.h"

namespace tapegrad::data {

// Returns the number of tokens written. The token file's vocab_size is tokenizer.vocab_size().
uint64_t encode_file_to_token_file(Tokenizer& tokenizer, const std::string& text_path, const std::string& token_path,
                                   size_t block_bytes = size_t(1) << 20);

}  // namespace tapegrad::data
