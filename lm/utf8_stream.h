// utf8_stream.h — decoded token bytes to a terminal, a token at a time. Byte-level BPE tokens can
// end in the middle of a UTF-8 character; Utf8Stream hands out only whole, valid UTF-8 and holds
// back an incomplete trailing sequence (at most 3 bytes: a valid lead byte and the continuation
// bytes that fit it so far) until the next push. Ill-formed bytes become U+FFFD exactly as in
// data/utf8.h (Python's bytes.decode("utf-8", errors="replace"): one U+FFFD per maximal invalid
// subpart), so the concatenation of every push() and the final finish() equals
// data::replace_invalid_utf8(all bytes) — Tokenizer::decode(all ids) when the bytes are
// Tokenizer::decode_bytes of the ids, pushed in any split.
#pragma once
#include <string>
#include <string_view>

namespace tapegrad::lm {

class Utf8Stream {
 public:
  // The valid UTF-8 (U+FFFD for ill-formed parts) that the bytes pushed so far make certain.
  std::string push(std::string_view bytes);
  // Flushes the held-back tail (an incomplete sequence: one U+FFFD) and starts over.
  std::string finish();
  // Bytes held back (0..3).
  size_t pending() const { return pending_.size(); }

 private:
  std::string pending_;
};

}  // namespace tapegrad::lm
