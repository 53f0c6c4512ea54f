// bpe_trainer.h — trains a byte-level BPE with GPT-2/CS336 semantics: special tokens cut the text
// first (no merge crosses or includes them), the GPT-2 regex pretokenizes the rest, and each step
// merges the most frequent adjacent pair, ties going to the lexicographically greatest pair of byte
// strings. Ids are laid out as described in bpe_model.h.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "data/bpe_model.h"

namespace tapegrad::data {

struct BpeTrainOptions {
  size_t vocab_size = 0;                    // special tokens + 256 bytes + merges
  std::vector<std::string> special_tokens;  // e.g. {"<|endoftext|>"}
  int num_threads = 1;                      // pretokenization threads (chunks cut as in cut_finder.h)
  size_t file_block_bytes = size_t(8) << 20; // train_bpe_file: bytes read per block (one block per thread in memory)
};

// Throws tapegrad::Error when vocab_size is below special tokens + 256, or when the text allows fewer
// merges than vocab_size asks for (the message says how many were possible).
BpeModel train_bpe(std::string_view text, const BpeTrainOptions& options);
// Same result as train_bpe(contents of the file), streaming the file in blocks cut where cut_finder.h
// allows: memory grows with the number of distinct pretokens (and one block per thread), not the file.
BpeModel train_bpe_file(const std::string& path, const BpeTrainOptions& options);
// train_bpe on the concatenation of the files (streamed the same way: a block may span two files).
BpeModel train_bpe_files(const std::vector<std::string>& paths, const BpeTrainOptions& options);

}  // namespace tapegrad::data
