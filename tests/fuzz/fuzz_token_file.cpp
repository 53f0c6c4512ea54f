// fuzz_token_file.cpp — libFuzzer target: the input is a token file (data/token_file.h, TokenFile),
// given to the reader as an in-memory file. Asserts: the reader throws only tapegrad::Error; a file it
// opens keeps what the format promises — width 2 or 4, a size of exactly 32 + count × width bytes,
// every token below vocab_size (operator[] and at() agree), at(size()) throws — and writing its tokens
// again with write_token_file and reopening gives back the same tokens and vocab_size.
#include <string>
#include <vector>

#include "data/token_file.h"
#include "fuzz_common.h"
#include "kernels/error.h"

using namespace tapegrad;
using namespace tapegrad::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile input("token_file");
  static fuzz::ScratchDir scratch;
  const std::string& path = input.set(fuzz::as_view(data, size));

  std::vector<uint32_t> tokens;
  uint64_t vocab_size = 0;
  try {
    const TokenFile file(path);
    FUZZ_ASSERT(file.token_width() == 2 || file.token_width() == 4, "token width is not 2 or 4");
    FUZZ_ASSERT(kTokenFileHeaderBytes + file.size() * file.token_width() == size, "size does not match the header");
    vocab_size = file.vocab_size();
    tokens.reserve(file.size());
    for (uint64_t i = 0; i < file.size(); ++i) {
      FUZZ_ASSERT(file[i] < file.vocab_size(), "token " + std::to_string(i) + " is not below vocab_size");
      FUZZ_ASSERT(file[i] == file.at(i), "operator[] and at() disagree");
      tokens.push_back(file[i]);
    }
    bool threw = false;
    try {
      (void)file.at(file.size());
    } catch (const Error&) {
      threw = true;
    }
    FUZZ_ASSERT(threw, "at(size()) did not throw");
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
    return 0;
  }
  // Our writer, given what was read, writes the same file (the width follows from vocab_size).
  const std::string copy = scratch.file("copy.tok");
  write_token_file(copy, tokens, vocab_size);
  const TokenFile again(copy);
  FUZZ_ASSERT(again.size() == tokens.size() && again.vocab_size() == vocab_size, "header changed in the round trip");
  for (uint64_t i = 0; i < again.size(); ++i) FUZZ_ASSERT(again[i] == tokens[i], "token changed in the round trip");
  return 0;
}
