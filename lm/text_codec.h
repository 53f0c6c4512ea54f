// text_codec.h — text ↔ token ids as generation needs them, for any tokenizer a model may come with:
// the prompt's ids (with whatever the tokenizer puts first, e.g. a BOS id), the bytes each generated
// id adds, and the id that ends a text. `tapegrad generate` works through this interface only.
//   auto codec = lm::codec_for_checkpoint(ck, path, "");   // the run's tokenizer (BPE today)
//   std::vector<uint32_t> ids = codec->encode_prompt("Once upon a time");
//   std::string bytes = codec->decode_token(prev, id);    // raw bytes: may end inside a UTF-8 character
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/bpe_model.h"
#include "optim/checkpoint.h"

namespace tapegrad::lm {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<uint32_t> encode_prompt(std::string_view text) = 0;
  // The bytes token `id` adds after token `prev` (tokenizers such as SentencePiece drop a leading
  // space after BOS); throws tapegrad::Error for an id outside the vocabulary.
  virtual std::string decode_token(uint32_t prev, uint32_t id) = 0;
  virtual std::optional<uint32_t> stop_token() const = 0;  // end of text, if the tokenizer has one
  virtual size_t vocab_size() const = 0;
  virtual std::string kind() const = 0;                    // "bpe", …
};

// Byte-level BPE (data::Tokenizer): the prompt encoded as is; the stop token is the first special
// token (e.g. "<|endoftext|>") when there is one.
std::unique_ptr<TextCodec> make_bpe_codec(data::BpeModel model);

// The codec of a checkpoint: its run's tokenizer (lm::tokenizer_for_checkpoint), or `override_path`.
std::unique_ptr<TextCodec> codec_for_checkpoint(const optim::Checkpoint& ck, const std::string& path,
                                                const std::string& override_path);

}  // namespace tapegrad::lm
