// text_codec.cpp — the byte-level BPE codec, appended special ids, and the choice of codec for a checkpoint
// (see text_codec.h).
#include "lm/text_codec.h"

#include <algorithm>
#include <filesystem>

#include "autograd/io/exact_number.h"
#include "data/tokenizer.h"
#include "lm/chat_template.h"
#include "lm/llama2c_tokenizer.h"
#include "lm/model_io.h"
#include "lm/run_dir.h"
#include "lm/text_tokenizer.h"

namespace tapegrad::lm {

namespace {

class BpeCodec final : public TextCodec {
 public:
  explicit BpeCodec(data::BpeModel model) : tok_(std::move(model)) {
    const auto& specials = tok_.model().special_tokens;
    if (!specials.empty()) {
      const auto ids = tok_.encode(specials.front());
      if (ids.size() == 1) stop_ = ids[0];
    }
  }
  std::vector<uint32_t> encode_prompt(std::string_view text) override { return tok_.encode(text); }
  std::vector<uint32_t> encode_text(std::string_view text) override { return tok_.encode(text); }
  std::vector<uint32_t> encode_text_plain(std::string_view text) override { return tok_.encode_ordinary(text); }
  std::vector<uint32_t> encode_prompt_plain(std::string_view text) override { return tok_.encode_ordinary(text); }
  std::string decode_token(uint32_t, uint32_t id) override { return tok_.decode_bytes({id}); }
  std::optional<uint32_t> stop_token() const override { return stop_; }
  size_t vocab_size() const override { return tok_.vocab_size(); }
  std::string kind() const override { return "bpe"; }

 private:
  data::Tokenizer tok_;
  std::optional<uint32_t> stop_;
};

// A tokenizer's codec with ids appended after its vocabulary (the chat template's special tokens).
class SpecialTokensCodec final : public TextCodec {
 public:
  SpecialTokensCodec(std::unique_ptr<TextCodec> base, std::vector<std::pair<uint32_t, std::string>> specials)
      : base_(std::move(base)), specials_(std::move(specials)) {
    size_t top = base_->vocab_size();
    for (const auto& [id, text] : specials_) {
      TG_CHECK(id >= base_->vocab_size(), "special token '{}' (id {}) is inside the tokenizer's vocabulary of {}",
               text, id, base_->vocab_size());
      top = std::max(top, size_t(id) + 1);
    }
    TG_CHECK(top == base_->vocab_size() + specials_.size(),
             "special token ids must follow the tokenizer's vocabulary of {} without gaps", base_->vocab_size());
    vocab_ = top;
  }
  std::vector<uint32_t> encode_prompt(std::string_view text) override { return base_->encode_prompt(text); }
  std::vector<uint32_t> encode_text(std::string_view text) override { return base_->encode_text(text); }
  std::vector<uint32_t> encode_text_plain(std::string_view text) override { return base_->encode_text_plain(text); }
  std::vector<uint32_t> encode_prompt_plain(std::string_view text) override {
    return base_->encode_prompt_plain(text);
  }
  std::string decode_token(uint32_t prev, uint32_t id) override {
    for (const auto& [special, text] : specials_)
      if (id == special) return text;
    return base_->decode_token(prev, id);
  }
  bool pieces_carry_leading_space() const override { return base_->pieces_carry_leading_space(); }
  std::optional<uint32_t> stop_token() const override { return base_->stop_token(); }
  size_t vocab_size() const override { return vocab_; }
  std::string kind() const override { return base_->kind(); }

 private:
  std::unique_ptr<TextCodec> base_;
  std::vector<std::pair<uint32_t, std::string>> specials_;
  size_t vocab_ = 0;
};

}  // namespace

std::unique_ptr<TextCodec> with_special_tokens(std::unique_ptr<TextCodec> base,
                                               std::vector<std::pair<uint32_t, std::string>> specials) {
  return std::make_unique<SpecialTokensCodec>(std::move(base), std::move(specials));
}

std::unique_ptr<TextCodec> make_bpe_codec(data::BpeModel model) { return std::make_unique<BpeCodec>(std::move(model)); }

namespace {

// The tokenizer's own codec (lm/text_tokenizer.h: the run's tokenizer.json or tokenizer.bin, or `override_path`).
std::unique_ptr<TextCodec> tokenizer_codec(const optim::Checkpoint& ck, const std::string& path,
                                           const std::string& override_path) {
  return text_tokenizer_for_checkpoint(ck, path, override_path).codec();
}

}  // namespace

std::unique_ptr<TextCodec> codec_for_checkpoint(const optim::Checkpoint& ck, const std::string& path,
                                                const std::string& override_path) {
  const auto vocab = ck.config.find("vocab_size");
  TG_CHECK(vocab != ck.config.end(), "checkpoint '{}' has no config.vocab_size", path);
  std::optional<ChatTemplate> chat;
  try {
    chat = chat_template_for_checkpoint(ck);
  } catch (const Error& e) {
    throw Error(fmt::format("checkpoint '{}': {}", path, e.what()));
  }
  if (!chat || chat->added_tokens == 0)
    return tokenizer_codec(ck, path, override_path);
  auto base = tokenizer_codec(ck, path, override_path);
  TG_CHECK(base->vocab_size() == chat->tokenizer_vocab,
           "checkpoint '{}' was instruction-tuned with a tokenizer of {} tokens; this one has {}", path,
           chat->tokenizer_vocab, base->vocab_size());
  std::vector<std::pair<uint32_t, std::string>> specials;
  for (uint32_t id : {chat->system_id, chat->user_id, chat->assistant_id, chat->end_id})
    specials.emplace_back(id, chat->special_text(id));
  std::sort(specials.begin(), specials.end());
  return with_special_tokens(std::move(base), std::move(specials));
}

}  // namespace tapegrad::lm
