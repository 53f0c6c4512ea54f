// stream_encode.h — encodes a text file into a token file without holding either in memory.
//
// The input is read through CutFileReader (file_blocks.h): blocks of block_bytes that end at a cut
// of cut_finder.h (after a special token the splitter must choose, or at a single '\n' between ASCII
// graphic characters), so each block encodes on its own and the ids are exactly those of
// tokenizer.encode(whole file). Memory is bounded by the block size: about two blocks of text plus
// one block's ids. When a block holds no cut, the reader appends the next block_bytes and looks
// again (the block grows until a cut or the end of the file), so the ids stay exact and memory then
// grows with the longest stretch without a cut — which takes text without a special token and
// without a newline between ASCII graphic characters (e.g. minified text on one line).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "data/tokenizer.h"

namespace tapegrad::data {

inline constexpr size_t kEncodeBlockBytes = size_t(1) << 20;

// Called after each block with the text bytes encoded so far and the file's size (the last call has
// bytes_done == bytes_total unless the file changed while it was read; an empty file gets no call).
using EncodeProgress = std::function<void(uint64_t bytes_done, uint64_t bytes_total)>;

// Returns the number of tokens written. The token file's vocab_size is tokenizer.vocab_size().
// block_bytes (> 0) is the read size; tiny values are valid (and used by the tests). num_threads > 1
// encodes each block with Tokenizer::encode_parallel (same ids). The token file is written to
// token_path + ".tmp" and renamed to token_path once complete; on any error the temp file is removed
// and token_path is left as it was.
uint64_t encode_file_to_token_file(Tokenizer& tokenizer, const std::string& text_path, const std::string& token_path,
                                   size_t block_bytes = kEncodeBlockBytes, const EncodeProgress& progress = {},
                                   int num_threads = 1);

}  // namespace tapegrad::data
