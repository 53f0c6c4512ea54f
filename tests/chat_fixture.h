// chat_fixture.h — what the chat tests share (tests/test_lm_chat.cpp, tests/cuda/test_cuda_generate.cpp):
// a 20-token codec (the letters a..p as ids 0..15, then the chat template's four ids 16..19) and a tiny
// random-weight model for it. Greedy decoding is deterministic, which is all the mechanics need.
#pragma once
#include <memory>
#include <string>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "lm/chat_template.h"
#include "lm/text_codec.h"
#include "nn/transformer_lm.h"

namespace tapegrad::testing {

class LetterCodec final : public lm::TextCodec {
 public:
  static constexpr uint32_t kLetters = 16;
  std::vector<uint32_t> encode_prompt(std::string_view text) override { return encode_text(text); }
  std::vector<uint32_t> encode_text(std::string_view text) override {
    std::vector<uint32_t> ids;
    for (char c : text) {
      TG_CHECK(c >= 'a' && c < char('a' + kLetters), "LetterCodec: '{}' is not one of a..p", c);
      ids.push_back(uint32_t(c - 'a'));
    }
    return ids;
  }
  std::string decode_token(uint32_t, uint32_t id) override {
    if (id < kLetters) return std::string(1, char('a' + id));
    const std::string special = chat.special_text(id);
    TG_CHECK(!special.empty(), "LetterCodec: id {} is outside the vocabulary", id);
    return special;
  }
  std::optional<uint32_t> stop_token() const override { return std::nullopt; }
  size_t vocab_size() const override { return kLetters + 4; }
  std::string kind() const override { return "letters"; }

  const lm::ChatTemplate chat = lm::ChatTemplate::appended(kLetters);
};

inline nn::TransformerLMConfig chat_model_config(int64_t context) {
  nn::TransformerLMConfig c;
  c.vocab_size = LetterCodec::kLetters + 4;
  c.context_length = context;
  c.d_model = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 32;
  c.dtype = kFloat64;  // greedy ties cannot differ between the cached and the fresh computation
  return c;
}

inline std::unique_ptr<nn::TransformerLM> chat_model(int64_t context, uint64_t seed = 7, DType dtype = kFloat64) {
  Generator gen(seed);
  nn::TransformerLMConfig c = chat_model_config(context);
  c.dtype = dtype;
  return std::make_unique<nn::TransformerLM>(c, &gen);
}

}  // namespace tapegrad::testing
