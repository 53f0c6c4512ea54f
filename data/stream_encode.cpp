// stream_encode.cpp — CutFileReader blocks (cut where encoding on each side gives the ids of the
// whole text) encoded one at a time into a TokenFileWriter.
#include "data/stream_encode.h"

#include "data/file_blocks.h"
#include "data/token_file.h"
#include "kernels/error.h"

namespace tapegrad::data {

uint64_t encode_file_to_token_file(Tokenizer& tokenizer, const std::string& text_path, const std::string& token_path,
                                   size_t block_bytes) {
  TG_CHECK(block_bytes > 0, "encode_file_to_token_file: block_bytes must be positive");
  // The reader first: a missing input fails before the token file is created.
  CutFileReader reader(text_path, tokenizer.model().special_tokens, block_bytes);
  TokenFileWriter writer(token_path, tokenizer.vocab_size());
  std::string block;
  while (reader.next(block)) writer.write(tokenizer.encode(block));
  writer.close();
  return writer.count();
}

}  // namespace tapegrad::data
