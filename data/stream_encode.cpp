// stream_encode.cpp — CutFileReader blocks (cut where encoding on each side gives the ids of the
// whole text) encoded one at a time into a TokenFileWriter on a temp file, renamed when complete.
#include "data/stream_encode.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "data/file_blocks.h"
#include "data/token_file.h"
#include "kernels/error.h"

namespace tapegrad::data {

uint64_t encode_file_to_token_file(Tokenizer& tokenizer, const std::string& text_path, const std::string& token_path,
                                   size_t block_bytes, const EncodeProgress& progress, int num_threads) {
  TG_CHECK(block_bytes > 0, "encode_file_to_token_file: block_bytes must be positive");
  // The reader first: a missing input fails before the token file is created.
  CutFileReader reader(text_path, tokenizer.model().special_tokens, block_bytes);
  std::error_code unknown;
  const uint64_t total = std::filesystem::file_size(text_path, unknown);
  const std::string tmp = token_path + ".tmp";
  uint64_t count = 0;
  try {
    TokenFileWriter writer(tmp, tokenizer.vocab_size());
    std::string block;
    uint64_t done = 0;
    while (reader.next(block)) {
      writer.write(num_threads > 1 ? tokenizer.encode_parallel(block, num_threads) : tokenizer.encode(block));
      done += block.size();
      if (progress) progress(done, std::max(done, unknown ? done : total));
    }
    writer.close();
    count = writer.count();
    TG_CHECK(std::rename(tmp.c_str(), token_path.c_str()) == 0, "encode_file_to_token_file: cannot rename {} to {}: {}",
             tmp, token_path, std::strerror(errno));
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  return count;
}

}  // namespace tapegrad::data
