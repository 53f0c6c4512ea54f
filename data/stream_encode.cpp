// stream_encode.cpp — block reader + "last final special token" cut + TokenFileWriter.
#include "data/stream_encode.h"

#include <algorithm>
#include <fstream>

#include "data/special_splitter.h"
#include "data/token_file.h"
#include "kernels/error.h"

namespace tapegrad::data {
namespace {

// End of the last special-token match in `buffer` that more input could not change: the splitter
// decides a match at position p from bytes [p, p + longest special), so a match starting at or
// before buffer.size() - longest is final. 0 when there is none.
size_t last_final_cut(const SpecialSplitter& splitter, std::string_view buffer, size_t longest) {
  if (buffer.size() < longest) return 0;
  const size_t last_final_start = buffer.size() - longest;
  size_t cursor = 0, cut = 0;
  splitter.split(
      buffer, [&](std::string_view piece) { cursor = size_t(piece.data() + piece.size() - buffer.data()); },
      [&](size_t index) {
        const size_t start = cursor;
        cursor += splitter.special_tokens()[index].size();
        if (start <= last_final_start) cut = cursor;
      });
  return cut;
}

}  // namespace

uint64_t encode_file_to_token_file(Tokenizer& tokenizer, const std::string& text_path, const std::string& token_path,
                                   size_t block_bytes) {
  TG_CHECK(block_bytes > 0, "encode_file_to_token_file: block_bytes must be positive");
  std::ifstream in(text_path, std::ios::binary);
  TG_CHECK(in.good(), "encode_file_to_token_file: cannot open {}", text_path);
  const SpecialSplitter splitter(tokenizer.model().special_tokens);
  size_t longest = 0;
  for (const auto& s : splitter.special_tokens()) longest = std::max(longest, s.size());

  TokenFileWriter writer(token_path, tokenizer.vocab_size());
  std::string buffer, block(block_bytes, '\0');
  while (true) {
    in.read(block.data(), std::streamsize(block.size()));
    const auto got = size_t(in.gcount());
    TG_CHECK(!in.bad(), "encode_file_to_token_file: {}: read error near byte offset {}", text_path, buffer.size());
    buffer.append(block.data(), got);
    const bool at_end = got < block.size();
    const size_t cut = at_end ? buffer.size() : (longest == 0 ? 0 : last_final_cut(splitter, buffer, longest));
    if (cut > 0) {
      writer.write(tokenizer.encode(std::string_view(buffer).substr(0, cut)));
      buffer.erase(0, cut);
    }
    if (at_end) break;
  }
  writer.close();
  return writer.count();
}

}  // namespace tapegrad::data
