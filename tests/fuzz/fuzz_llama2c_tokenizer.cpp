// fuzz_llama2c_tokenizer.cpp — libFuzzer target: llama2.c's tokenizer file (lm/llama2c_tokenizer.h).
// The input's first 2 bytes (little-endian) are the vocabulary size (which the file itself does not
// hold); the rest is the file. Asserts: the reader throws only tapegrad::Error; with a tokenizer it
// reads, encode gives BOS first and ids inside the vocabulary, decode of every id works, and, when ids
// 3..258 are the byte pieces <0x00>..<0xFF> as in every llama2.c tokenizer, decoding the ids after BOS
// gives back the text (for texts that do not themselves spell a byte piece "<0x.."); and encode gives exactly
// encode_reference's ids (run.c's O(n²) loop; lm/llama2c_encode.h) on those texts, on the input's own bytes (up
// to 512: they hold the pieces, so merges happen) and on pieces of the vocabulary strung together.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "kernels/error.h"
#include "lm/llama2c_tokenizer.h"

using namespace tapegrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile input("llama2c_tokenizer");
  if (size < 2) return 0;
  const size_t vocab_size = size_t(data[0]) | size_t(data[1]) << 8;
  const std::string& path = input.set(fuzz::as_view(data + 2, size - 2));
  try {
    const lm::Llama2cTokenizer tok(path, vocab_size);
    FUZZ_ASSERT(tok.vocab_size() == vocab_size, "another vocabulary size than asked for");
    bool byte_pieces = true;
    for (uint32_t b = 0; b < 256; ++b) byte_pieces = byte_pieces && tok.piece(b + 3) == fmt::format("<0x{:02X}>", b);
    for (uint32_t id = 0; id < tok.vocab_size(); ++id) (void)tok.decode(lm::Llama2cTokenizer::kBos, id);
    std::vector<std::string> texts = {"Once upon a time", "h\xc3\xa9llo w\xc3\xb6rld \xf0\x9f\x98\x80", "\xff\x80 raw",
                                      " ", ""};
    texts.emplace_back(fuzz::as_view(data + 2, std::min<size_t>(size - 2, 512)));
    std::string pieces;  // every 7th piece after the byte pieces, and a few twice
    for (uint32_t id = 259; id < tok.vocab_size() && pieces.size() < 512; id += 7)
      pieces += tok.piece(id) + (id % 3 == 0 ? tok.piece(id) : "");
    texts.push_back(pieces);
    lm::Llama2cEncodeCache cache;  // shared by the texts, as a document encoder's thread shares it
    for (const std::string& text : texts) {
      std::vector<uint32_t> ids;
      try {
        ids = tok.encode(text);  // refused (Error) when there is no " " piece
      } catch (const Error&) {
        bool refused = false;
        try {
          (void)tok.encode_reference(text);
        } catch (const Error&) {
          refused = true;
        }
        FUZZ_ASSERT(refused, "encode refused a text that encode_reference encodes");
        continue;
      }
      for (bool bos : {true, false}) {
        const std::vector<uint32_t> want = tok.encode_reference(text, bos);
        std::vector<uint32_t> got;
        tok.encode(text, bos, got, cache);
        FUZZ_ASSERT(got == want && (!bos || ids == want), "encode and encode_reference give different ids");
      }
      FUZZ_ASSERT(!ids.empty(), "encode gave no BOS");
      for (uint32_t id : ids) FUZZ_ASSERT(id < tok.vocab_size(), "encode gave an id outside the vocabulary");
      if (!byte_pieces || ids[0] != lm::Llama2cTokenizer::kBos) continue;  // BOS merged away: nothing to compare
      std::string decoded;
      for (size_t i = 1; i < ids.size(); ++i) decoded += tok.decode(ids[i - 1], ids[i]);
      bool spells_byte_piece = false;  // a piece "<0x41>" reached by merging decodes as one byte
      for (size_t i = 1; i < ids.size(); ++i) spells_byte_piece = spells_byte_piece || tok.piece(ids[i]).find("<0x") != std::string::npos;
      if (!spells_byte_piece && tok.piece(ids[0]) == "<s>" && !text.empty() && tok.piece(ids[1]).starts_with(" "))
        FUZZ_ASSERT(decoded == text, "decoding the ids of '" + text + "' gave '" + decoded + "'");
    }
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
  }
  return 0;
}
