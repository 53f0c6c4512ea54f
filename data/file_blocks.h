// file_blocks.h — reads a text file (or the concatenation of several) as consecutive blocks that end
// at cuts (cut_finder.h), so that each block can be split at special tokens and pretokenized on its
// own and the pieces of all blocks are exactly those of the whole text. Memory: about one block, plus
// the longest stretch of the text without a cut (a file with no newline between ASCII graphic
// characters and no special token is held whole).
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
  // The files one after the other, as one text (a block may span two files). Every file is checked
  // for reading here, so a missing one fails before any block is read.
  CutFileReader(std::vector<std::string> paths, std::vector<std::string> special_tokens, size_t block_bytes);

  // Replaces `out` with the next block (read block_bytes at a time until a cut is found, then cut
  // at the last cut; the rest of the file once it ends); false when the file is exhausted.
  bool next(std::string& out);
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  size_t read_some(char* out, size_t n);  // up to n bytes of the concatenation; fewer only at its end

  std::vector<std::string> paths_;
  size_t file_ = 0;             // index of the open file in paths_
  uint64_t file_offset_ = 0;    // bytes read from it
  std::ifstream in_;
  CutFinder cuts_;
  size_t block_bytes_;
  std::string carry_;  // read past the last cut
  bool at_end_ = false;
  uint64_t bytes_read_ = 0;
};

}  // namespace tapegrad::data
