// file_blocks.h — reads a text file as consecutive blocks that end at cuts (cut_finder.h), so that
// each block can be split at special tokens and pretokenized on its own and the pieces of all blocks
// are exactly those of the whole file. Memory: about one block, plus the longest stretch of the file
// without a cut (a file with no newline between ASCII graphic characters and no special token is
// held whole).
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "data/cut_finder.h"

namespace tapegrad::data {

class CutFileReader {
 public:
  // Throws tapegrad::Error when the file cannot be opened or block_bytes is 0.
  CutFileReader(const std::string& path, std::vector<std::string> special_tokens, size_t block_bytes);

  // Replaces `out` with the next block (read block_bytes at a time until a cut is found, then cut
  // at the last cut; the rest of the file once it ends); false when the file is exhausted.
  bool next(std::string& out);
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  std::string path_;
  std::ifstream in_;
  CutFinder cuts_;
  size_t block_bytes_;
  std::string carry_;  // read past the last cut
  bool at_end_ = false;
  uint64_t bytes_read_ = 0;
};

}  // namespace tapegrad::data
