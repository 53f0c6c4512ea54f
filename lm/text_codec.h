// text_codec.h — text ↔ token ids as generation needs them, for any tokenizer a model may come with:
// the prompt's ids (with whatever the tokenizer puts first, e.g. a BOS id), the bytes each generated
// id adds, and the id that ends a text. `tapegrad generate` works through this interface only.
//   auto codec = lm::codec_for_checkpoint(ck, path, "");   // the run's tokenizer (BPE today)
//   std::vector<uint32_t> ids = codec->encode_prompt("Once upon a time");
//   std::string bytes = codec->decode_token(prev, id);    // raw bytes: may end inside a UTF-8 character
// A checkpoint trained with a chat template (lm/chat_template.h) gets a codec that also knows the template's
// special ids appended to the tokenizer's vocabulary: vocab_size() is the model's, decode_token of such an id
// is its text ("<|end|>"), so `generate` works on an SFT checkpoint as on any other.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/bpe_model.h"
#include "optim/checkpoint.h"

namespace tapegrad::lm {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<uint32_t> encode_prompt(std::string_view text) = 0;
  // The ids of `text` inside a sequence: nothing put first (no BOS). For a chat message's content.
  virtual std::vector<uint32_t> encode_text(std::string_view text) = 0;
  // The same with every special token's text ("<|end|>", "<|endoftext|>") encoded as ordinary text, never as a
  // special id: a chat message's content (special ids come only from the chat template itself), and generate's
  // prompt unless --special-tokens. The defaults suit a tokenizer that never reads special tokens in text.
  virtual std::vector<uint32_t> encode_text_plain(std::string_view text) { return encode_text(text); }
  virtual std::vector<uint32_t> encode_prompt_plain(std::string_view text) { return encode_prompt(text); }
  // The bytes token `id` adds after token `prev` (tokenizers such as SentencePiece drop a leading
  // space after BOS); throws tapegrad::Error for an id outside the vocabulary.
  virtual std::string decode_token(uint32_t prev, uint32_t id) = 0;
  // True when pieces carry the space before a word (SentencePiece's "▁Once", llama2.c's " Once"): a text that
  // starts mid-sequence (a chat answer) then begins with a space, which chat drops (lm/chat_session.h).
  virtual bool pieces_carry_leading_space() const { return false; }
  virtual std::optional<uint32_t> stop_token() const = 0;  // end of text, if the tokenizer has one
  virtual size_t vocab_size() const = 0;
  virtual std::string kind() const = 0;                    // "bpe", …
};

// Byte-level BPE (data::Tokenizer): the prompt encoded as is; the stop token is the first special
// token (e.g. "<|endoftext|>") when there is one.
std::unique_ptr<TextCodec> make_bpe_codec(data::BpeModel model);

// `base` with `specials` (id → text) appended after its vocabulary: vocab_size() = base's + specials, each
// special id decodes to its text; encoding is base's (text never becomes a special id).
std::unique_ptr<TextCodec> with_special_tokens(std::unique_ptr<TextCodec> base,
                                               std::vector<std::pair<uint32_t, std::string>> specials);

// The codec of a checkpoint: its run's tokenizer (lm::tokenizer_for_checkpoint), or `override_path`; with the
// chat template's appended ids when the checkpoint records one (lm::chat_template_for_checkpoint).
std::unique_ptr<TextCodec> codec_for_checkpoint(const optim::Checkpoint& ck, const std::string& path,
                                                const std::string& override_path);

}  // namespace tapegrad::lm
