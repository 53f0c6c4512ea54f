// file_blocks.cpp — block reads (across file ends), appended to the text carried over from the last
// cut, cut again.
#include "data/file_blocks.h"

#include <filesystem>

#include "kernels/error.h"

namespace tapegrad::data {
namespace {

void check_readable(const std::string& path) {
  std::error_code error;
  TG_CHECK(!std::filesystem::is_directory(path, error), "cannot open {}: it is a directory", path);
  TG_CHECK(std::ifstream(path, std::ios::binary).good(), "cannot open {}", path);
}

}  // namespace

CutFileReader::CutFileReader(const std::string& path, std::vector<std::string> special_tokens, size_t block_bytes)
    : CutFileReader(std::vector<std::string>{path}, std::move(special_tokens), block_bytes) {}

CutFileReader::CutFileReader(std::vector<std::string> paths, std::vector<std::string> special_tokens,
                             size_t block_bytes)
    : paths_(std::move(paths)), cuts_(std::move(special_tokens)), block_bytes_(block_bytes) {
  TG_CHECK(!paths_.empty(), "CutFileReader: no file to read");
  for (const std::string& path : paths_) check_readable(path);
  TG_CHECK(block_bytes > 0, "reading {}: the block size must be positive", paths_[0]);
  in_.open(paths_[0], std::ios::binary);
  TG_CHECK(in_.good(), "cannot open {}", paths_[0]);
}

size_t CutFileReader::read_some(char* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    in_.read(out + got, std::streamsize(n - got));
    const auto count = size_t(in_.gcount());
    TG_CHECK(!in_.bad(), "{}: read error near byte offset {}", paths_[file_], file_offset_);
    got += count, file_offset_ += count;
    if (got == n) break;
    // this file has ended: go on with the next one
    if (++file_ == paths_.size()) {
      --file_;
      break;
    }
    in_.close();
    in_.clear();
    in_.open(paths_[file_], std::ios::binary);
    TG_CHECK(in_.good(), "cannot open {}", paths_[file_]);
    file_offset_ = 0;
  }
  return got;
}

bool CutFileReader::next(std::string& out) {
  out.assign(carry_);
  carry_.clear();
  while (!at_end_) {
    const size_t old = out.size();
    out.resize(old + block_bytes_);
    const size_t got = read_some(out.data() + old, block_bytes_);
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
