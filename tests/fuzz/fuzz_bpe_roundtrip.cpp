// fuzz_bpe_roundtrip.cpp — libFuzzer target: the byte-level BPE encoder (data/tokenizer.h) on arbitrary
// bytes, with a small tokenizer trained once (data/bpe_trainer.h) from a fixed text with the special token
// <|endoftext|>. Asserts, for every input x: encode never throws, every id is in the vocabulary,
// decode_bytes(encode(x)) == x, decode(encode(x)) == replace_invalid_utf8(x), and encode_parallel(x, 2)
// gives the same ids as encode(x).
#include <string>
#include <vector>

#include "data/bpe_trainer.h"
#include "data/tokenizer.h"
#include "data/utf8.h"
#include "fuzz_common.h"

using namespace tapegrad;
using namespace tapegrad::data;

namespace {

Tokenizer& trained_tokenizer() {
  static Tokenizer tokenizer = [] {
    std::string text;
    const char* lines[] = {
        "Once upon a time, there was a little girl named Lily. She liked to play in the park.\n",
        "The cat sat on the mat. It's 42 degrees; don't you think we'll go?\n",
        "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80 emoji  \t tabs\r\n",
        "  leading spaces and   runs of   spaces\n\n\nnewlines 1234567890 x+y=z\n",
    };
    for (int i = 0; i < 8; ++i)
      for (const char* line : lines) text += std::string(line) + "<|endoftext|>";
    BpeTrainOptions options;
    options.vocab_size = 1 + 256 + 120;
    options.special_tokens = {"<|endoftext|>"};
    return Tokenizer(train_bpe(text, options), 1 << 10);
  }();
  return tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Tokenizer& tokenizer = trained_tokenizer();
  const std::string text(fuzz::as_view(data, size));
  const std::vector<uint32_t> ids = tokenizer.encode(text);
  for (uint32_t id : ids) FUZZ_ASSERT(id < tokenizer.vocab_size(), "encode gave an id outside the vocabulary");
  FUZZ_ASSERT(tokenizer.decode_bytes(ids) == text, "decode_bytes(encode(x)) != x");
  FUZZ_ASSERT(tokenizer.decode(ids) == replace_invalid_utf8(text), "decode(encode(x)) != replace_invalid_utf8(x)");
  FUZZ_ASSERT(tokenizer.encode_parallel(text, 2) == ids, "encode_parallel(x, 2) != encode(x)");
  return 0;
}
