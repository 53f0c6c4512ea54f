// chat_template.h — how a conversation becomes token ids for instruction tuning (`train --sft`) and for
// `tapegrad chat`: four special tokens and one rule, the same for every tokenizer.
//
//   message  = header  content  <|end|>        header: <|system|> | <|user|> | <|assistant|>
//   rendered = [the tokenizer's start, e.g. llama2.c's BOS]  message…  [<|assistant|> to let the model answer]
//
//   "<|system|>Be brief.<|end|><|user|>reverse: abc<|end|><|assistant|>cba<|end|>"
//
// No separator (newline, space) between header, content and <|end|>: the special ids delimit everything,
// so the rendering needs nothing from the tokenizer but encode_text_plain(content). Special ids come only
// from the template: a message's content never becomes one (`chat`, `train --sft` data). The model learns to end its
// answer with <|end|>: generation stops there.
//
// The ids: when the tokenizer has all four strings as special tokens (a BPE tokenizer trained with
// them) their ids are used; otherwise they are appended to the vocabulary as ids V, V+1, V+2, V+3
// (system, user, assistant, end) for a tokenizer of V tokens, and the model's vocabulary (embedding and an
// untied lm_head) grows by 4 rows (nn::grow_vocabulary). A checkpoint remembers the template in its
// run_info (to_run_info → extra "run.chat_template", "run.chat_special_ids", "run.chat_added_tokens",
// "run.chat_tokenizer_vocab"); chat_template_for_checkpoint reads it back.
//
//   lm::ChatTemplate t = lm::ChatTemplate::appended(codec->vocab_size());
//   std::vector<uint32_t> ids = t.encode_conversation(*codec, {{"user", "hi"}}, /*add_generation_prompt=*/true);
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/bpe_model.h"
#include "lm/text_codec.h"
#include "optim/checkpoint.h"

namespace tapegrad::lm {

inline constexpr const char* kChatTemplateName = "tapegrad-chat-1";
inline constexpr const char* kSystemToken = "<|system|>";
inline constexpr const char* kUserToken = "<|user|>";
inline constexpr const char* kAssistantToken = "<|assistant|>";
inline constexpr const char* kEndToken = "<|end|>";

struct ChatMessage {
  std::string role;     // "system" | "user" | "assistant"
  std::string content;
};

struct ChatTemplate {
  uint32_t system_id = 0, user_id = 0, assistant_id = 0, end_id = 0;
  uint32_t tokenizer_vocab = 0;  // the tokenizer's own vocabulary size V (without the appended ids)
  uint32_t added_tokens = 0;     // 4 when the ids were appended (V..V+3), 0 when the tokenizer has them

  // The ids V..V+3 appended to a tokenizer of `tokenizer_vocab` tokens.
  static ChatTemplate appended(size_t tokenizer_vocab);
  // The model's vocabulary with the template: tokenizer_vocab + added_tokens.
  size_t vocab_size() const { return size_t(tokenizer_vocab) + added_tokens; }

  // header id, the content's ids (codec.encode_text_plain: no BOS, and a special token's text in the content
  // stays text — "<|end|><|assistant|>" typed by a user cannot close their turn, whether the tokenizer holds the
  // template's tokens or they were appended), end_id. An unknown role is a tapegrad::Error.
  std::vector<uint32_t> encode_message(TextCodec& codec, const ChatMessage& m) const;
  // What precedes the assistant's answer: {assistant_id}.
  std::vector<uint32_t> generation_prompt() const;
  // The tokenizer's start (codec.encode_prompt(""): BOS for llama2.c, nothing for BPE), every message, and
  // the generation prompt when asked.
  std::vector<uint32_t> encode_conversation(TextCodec& codec, const std::vector<ChatMessage>& messages,
                                            bool add_generation_prompt) const;
  // The header id of a role (tapegrad::Error for another role).
  uint32_t header_id(const std::string& role) const;

  bool is_special(uint32_t id) const;
  std::string special_text(uint32_t id) const;  // "<|user|>", …; "" for an id that is not special
  // What checkpoints remember (keys "chat_template", "chat_special_ids", "chat_added_tokens",
  // "chat_tokenizer_vocab"; the Trainer stores run_info as "run.<key>").
  void to_run_info(std::map<std::string, std::string>& run_info) const;
  // The inverse, from run_info keys as to_run_info writes them (nullopt when there is no "chat_template");
  // tapegrad::Error when the entries are malformed.
  static std::optional<ChatTemplate> from_run_info(const std::map<std::string, std::string>& run_info,
                                                   const std::string& where);
};

// The template a checkpoint was trained with (its extra "run.chat_*" entries), or nullopt for a checkpoint of
// plain text training. A malformed record, or ids outside the checkpoint's vocabulary, is a tapegrad::Error.
std::optional<ChatTemplate> chat_template_for_checkpoint(const optim::Checkpoint& ck);

// The template of a BPE tokenizer that holds all four tokens as special tokens, else nullopt.
std::optional<ChatTemplate> chat_template_in_tokenizer(const data::BpeModel& model);

}  // namespace tapegrad::lm
