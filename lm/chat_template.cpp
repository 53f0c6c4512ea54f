// chat_template.cpp — the chat template's ids, rendering and record in checkpoints (see chat_template.h).
#include "lm/chat_template.h"

#include <fmt/format.h>

#include "autograd/io/exact_number.h"
#include "kernels/error.h"

namespace tapegrad::lm {

namespace {

uint32_t parse_u32(const std::string& s, const std::string& key, const std::string& where) {
  return parse_number<uint32_t>(s, fmt::format("{}: '{}'", where, key));
}

}  // namespace

ChatTemplate ChatTemplate::appended(size_t tokenizer_vocab) {
  TG_CHECK(tokenizer_vocab > 0 && tokenizer_vocab + 4 <= (size_t(1) << 31),
           "chat template: a tokenizer of {} tokens cannot take 4 more ids", tokenizer_vocab);
  ChatTemplate t;
  const auto v = uint32_t(tokenizer_vocab);
  t.system_id = v, t.user_id = v + 1, t.assistant_id = v + 2, t.end_id = v + 3;
  t.tokenizer_vocab = v;
  t.added_tokens = 4;
  return t;
}

uint32_t ChatTemplate::header_id(const std::string& role) const {
  if (role == "system") return system_id;
  if (role == "user") return user_id;
  if (role == "assistant") return assistant_id;
  throw Error(fmt::format("chat template: unknown role '{}' (system, user or assistant)", role));
}

std::vector<uint32_t> ChatTemplate::encode_message(TextCodec& codec, const ChatMessage& m) const {
  std::vector<uint32_t> ids{header_id(m.role)};
  const std::vector<uint32_t> content = codec.encode_text_plain(m.content);  // never a special id
  ids.insert(ids.end(), content.begin(), content.end());
  ids.push_back(end_id);
  return ids;
}

std::vector<uint32_t> ChatTemplate::generation_prompt() const { return {assistant_id}; }

std::vector<uint32_t> ChatTemplate::encode_conversation(TextCodec& codec, const std::vector<ChatMessage>& messages,
                                                        bool add_generation_prompt) const {
  std::vector<uint32_t> ids = codec.encode_prompt("");
  for (const ChatMessage& m : messages) {
    const std::vector<uint32_t> one = encode_message(codec, m);
    ids.insert(ids.end(), one.begin(), one.end());
  }
  if (add_generation_prompt) ids.push_back(assistant_id);
  return ids;
}

bool ChatTemplate::is_special(uint32_t id) const {
  return id == system_id || id == user_id || id == assistant_id || id == end_id;
}

std::string ChatTemplate::special_text(uint32_t id) const {
  if (id == system_id) return kSystemToken;
  if (id == user_id) return kUserToken;
  if (id == assistant_id) return kAssistantToken;
  if (id == end_id) return kEndToken;
  return "";
}

void ChatTemplate::to_run_info(std::map<std::string, std::string>& run_info) const {
  run_info["chat_template"] = kChatTemplateName;
  run_info["chat_special_ids"] = fmt::format("{},{},{},{}", system_id, user_id, assistant_id, end_id);
  run_info["chat_added_tokens"] = fmt::format("{}", added_tokens);
  run_info["chat_tokenizer_vocab"] = fmt::format("{}", tokenizer_vocab);
}

std::optional<ChatTemplate> ChatTemplate::from_run_info(const std::map<std::string, std::string>& run_info,
                                                        const std::string& where) {
  const auto name = run_info.find("chat_template");
  if (name == run_info.end()) return std::nullopt;
  TG_CHECK(name->second == kChatTemplateName, "{}: chat template '{}' is not one this build knows ({})", where,
           name->second, kChatTemplateName);
  auto field = [&](const char* key) -> const std::string& {
    const auto it = run_info.find(key);
    TG_CHECK(it != run_info.end(), "{}: the chat template's record has no '{}'", where, key);
    return it->second;
  };
  ChatTemplate t;
  const std::string& ids = field("chat_special_ids");
  std::vector<uint32_t> parsed;
  size_t at = 0;
  while (true) {
    const size_t comma = ids.find(',', at);
    parsed.push_back(parse_u32(ids.substr(at, comma == std::string::npos ? std::string::npos : comma - at),
                               "chat_special_ids", where));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  TG_CHECK(parsed.size() == 4, "{}: 'chat_special_ids' = '{}' must hold 4 ids (system, user, assistant, end)", where,
           ids);
  t.system_id = parsed[0], t.user_id = parsed[1], t.assistant_id = parsed[2], t.end_id = parsed[3];
  t.added_tokens = parse_u32(field("chat_added_tokens"), "chat_added_tokens", where);
  t.tokenizer_vocab = parse_u32(field("chat_tokenizer_vocab"), "chat_tokenizer_vocab", where);
  TG_CHECK(t.added_tokens == 0 || t.added_tokens == 4, "{}: 'chat_added_tokens' = {} must be 0 or 4", where,
           t.added_tokens);
  for (uint32_t id : parsed)
    TG_CHECK(id < t.vocab_size(), "{}: chat token id {} is outside the vocabulary of {}", where, id, t.vocab_size());
  TG_CHECK(parsed[0] != parsed[1] && parsed[0] != parsed[2] && parsed[0] != parsed[3] && parsed[1] != parsed[2] &&
               parsed[1] != parsed[3] && parsed[2] != parsed[3],
           "{}: 'chat_special_ids' = '{}' must be 4 different ids", where, ids);
  return t;
}

std::optional<ChatTemplate> chat_template_for_checkpoint(const optim::Checkpoint& ck) {
  std::map<std::string, std::string> run_info;
  for (const auto& [key, value] : ck.extra)
    if (key.starts_with("run.chat_")) run_info[key.substr(4)] = value;
  auto t = ChatTemplate::from_run_info(run_info, "checkpoint");
  if (!t) return t;
  const auto vocab = ck.config.find("vocab_size");
  TG_CHECK(vocab != ck.config.end() && vocab->second == fmt::format("{}", t->vocab_size()),
           "checkpoint: its chat template needs a vocabulary of {} tokens, the model has {}", t->vocab_size(),
           vocab == ck.config.end() ? std::string("(none)") : vocab->second);
  return t;
}

std::optional<ChatTemplate> chat_template_in_tokenizer(const data::BpeModel& model) {
  auto find = [&](const char* text) -> std::optional<uint32_t> {
    bool special = false;
    for (const std::string& s : model.special_tokens) special |= s == text;
    if (!special) return std::nullopt;
    for (size_t id = 0; id < model.vocab.size(); ++id)
      if (model.vocab[id] == text) return uint32_t(id);
    return std::nullopt;
  };
  const auto s = find(kSystemToken), u = find(kUserToken), a = find(kAssistantToken), e = find(kEndToken);
  if (!s || !u || !a || !e) return std::nullopt;
  ChatTemplate t;
  t.system_id = *s, t.user_id = *u, t.assistant_id = *a, t.end_id = *e;
  t.tokenizer_vocab = uint32_t(model.vocab.size());
  t.added_tokens = 0;
  return t;
}

}  // namespace tapegrad::lm
