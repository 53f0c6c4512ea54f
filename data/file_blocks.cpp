// file_blocks.cpp — block reads, appended to the text carried over from the last cut, cut again.
#include "data/file_blocks.h"

#include "kernels/error.h"

namespace tapegrad::data {

CutFileReader::CutFileReader(const std::string& path, std::vector<std::string> special_tokens, size_t block_bytes)
    : path_(path), in_(path, std::ios::binary), cuts_(std::move(special_tokens)), block_bytes_(block_bytes) {
  TG_CHECK(in_.good(), "cannot open {}", path);
  TG_CHECK(block_bytes > 0, "reading {}: the block size must be positive", path);
}

bool CutFileReader::next(std::string& out) {
  out.assign(carry_);
  carry_.clear();
  while (!at_end_) {
    const size_t old = out.size();
    out.resize(old + block_bytes_);
    in_.read(out.data() + old, std::streamsize(block_bytes_));
    const auto got = size_t(in_.gcount());
    TG_CHECK(!in_.bad(), "{}: read error near byte offset {}", path_, bytes_read_);
    out.resize(old + got);
    bytes_read_ += got;
    if (got < block_bytes_) {
      at_end_ = true;
      break;
    }
    // Positions before old - lookahead were already refused with all the bytes their decision reads.
    const size_t after = old > cuts_.lookahead() + 1 ? old - cuts_.lookahead() - 1 : 0;
    if (const size_t cut = cuts_.last_cut(out, after); cut > 0) {
      carry_.assign(out, cut);
      out.resize(cut);
      return true;
    }
  }
  return !out.empty();
}

}  // namespace tapegrad::data
