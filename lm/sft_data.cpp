// sft_data.cpp — instruction-tuning JSONL, loss masks and padded batches (see sft_data.h).
#include "lm/sft_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "data/file_io.h"
#include "data/json_file.h"
#include "kernels/error.h"

namespace tapegrad::lm {

namespace {

using json = nlohmann::json;

// The string value of obj[key], or an error naming it.
std::string string_field(const json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  TG_CHECK(it != obj.end(), "{}: no \"{}\"", where, key);
  TG_CHECK(it->is_string(), "{}: \"{}\" is a JSON {}, not a string", where, key, it->type_name());
  return it->get<std::string>();
}

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

std::vector<int64_t> SftExample::targets() const {
  std::vector<int64_t> t(ids.size() > 0 ? ids.size() - 1 : 0, kIgnoreIndex);
  for (size_t i = 0; i + 1 < ids.size(); ++i)
    if (trained[i + 1]) t[i] = int64_t(ids[i + 1]);
  return t;
}

size_t SftExample::answer_tokens() const {
  return size_t(std::count(trained.begin(), trained.end(), uint8_t(1)));
}

std::vector<ChatMessage> parse_sft_line(std::string_view line, const std::string& where, std::string* group) {
  json j;
  try {
    j = json::parse(line.begin(), line.end());
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not JSON ({})", where, data::json_error_reason(e.what())));
  }
  TG_CHECK(j.is_object(), "{}: a JSON {}, not an object with \"messages\" or \"prompt\"/\"completion\"", where,
           j.type_name());
  const bool has_messages = j.contains("messages");
  const bool has_prompt = j.contains("prompt") || j.contains("completion");
  TG_CHECK(has_messages != has_prompt, "{}: {}", where,
           has_messages ? "both \"messages\" and \"prompt\"/\"completion\": give one form"
                        : "no \"messages\" (nor \"prompt\" and \"completion\")");
  std::vector<ChatMessage> out;
  const bool has_task = j.contains("task");
  if (group) *group = has_task ? string_field(j, "task", where) : std::string();
  if (has_prompt) {
    out.push_back({"user", string_field(j, "prompt", where)});
    out.push_back({"assistant", string_field(j, "completion", where)});
    return out;
  }
  const json& messages = j["messages"];
  TG_CHECK(messages.is_array(), "{}: \"messages\" is a JSON {}, not an array", where, messages.type_name());
  TG_CHECK(!messages.empty(), "{}: \"messages\" is empty", where);
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string at = fmt::format("{}: messages[{}]", where, i);
    const json& m = messages[i];
    TG_CHECK(m.is_object(), "{} is a JSON {}, not an object with \"role\" and \"content\"", at, m.type_name());
    ChatMessage msg{string_field(m, "role", at), string_field(m, "content", at)};
    TG_CHECK(msg.role == "system" || msg.role == "user" || msg.role == "assistant",
             "{}: unknown role \"{}\" (system, user or assistant)", at, msg.role);
    if (group && !has_task && msg.role == "system" && group->empty()) *group = msg.content;
    out.push_back(std::move(msg));
  }
  return out;
}

SftExample encode_sft_example(const std::vector<ChatMessage>& messages, TextCodec& codec, const ChatTemplate& chat,
                              const std::string& where, size_t max_ids) {
  SftExample ex;
  ex.where = where;
  ex.ids = codec.encode_prompt("");  // the tokenizer's start (BOS for llama2.c): context, not a target
  ex.trained.assign(ex.ids.size(), 0);
  bool answered = false;
  for (const ChatMessage& m : messages) {
    std::vector<uint32_t> ids;
    try {
      ids = chat.encode_message(codec, m);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", where, e.what()));
    }
    const bool assistant = m.role == "assistant";
    answered |= assistant;
    ex.ids.insert(ex.ids.end(), ids.begin(), ids.end());
    // The header is given (the prompt ends with it); the content and <|end|> are what the model learns.
    ex.trained.push_back(0);
    ex.trained.insert(ex.trained.end(), ids.size() - 1, assistant ? 1 : 0);
  }
  TG_CHECK(answered, "{}: no assistant message (nothing to learn from this example)", where);
  TG_CHECK(max_ids == 0 || ex.ids.size() <= max_ids,
           "{}: the example is {} tokens, more than the context + 1 = {} (shorten it, or train with a longer "
           "--context)",
           where, ex.ids.size(), max_ids);
  return ex;
}

std::vector<SftExample> parse_sft_jsonl(std::string_view text, const std::string& name, TextCodec& codec,
                                        const ChatTemplate& chat, size_t max_ids) {
  std::vector<SftExample> out;
  size_t line_no = 0;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(at, nl - at);
    at = nl + 1;
    ++line_no;
    if (blank(line)) continue;
    const std::string where = fmt::format("{}:{}", name, line_no);
    std::string group;
    const std::vector<ChatMessage> messages = parse_sft_line(line, where, &group);
    out.push_back(encode_sft_example(messages, codec, chat, where, max_ids));
    out.back().group = std::move(group);
  }
  TG_CHECK(!out.empty(), "{}: no examples (one JSON object per line: {{\"messages\": [...]}} or {{\"prompt\": ..., "
           "\"completion\": ...}})", name);
  return out;
}

std::vector<SftExample> read_sft_jsonl(const std::string& path, TextCodec& codec, const ChatTemplate& chat,
                                       size_t max_ids) {
  return parse_sft_jsonl(data::read_whole_file(path, "--sft"), path, codec, chat, max_ids);
}

namespace {

// SplitMix64's finaliser: a bijection of 64-bit words that mixes every input bit into every output bit.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<SftExample> hold_out_examples(std::vector<SftExample>& all, double fraction, uint64_t seed) {
  TG_CHECK(std::isfinite(fraction) && fraction >= 0 && fraction < 1, "the held-out fraction {} must be in [0, 1)",
           fraction);
  const size_t n = all.size();
  size_t k = 0;
  if (fraction > 0 && n >= 2) k = std::clamp(size_t(std::llround(double(n) * fraction)), size_t(1), n - 1);
  // Rank the examples by a seeded hash of their index; the k lowest are held out.
  std::vector<std::pair<uint64_t, size_t>> rank(n);
  for (size_t i = 0; i < n; ++i) rank[i] = {splitmix64(seed ^ splitmix64(uint64_t(i))), i};
  std::vector<uint8_t> out(n, 0);
  if (k > 0) {
    std::nth_element(rank.begin(), rank.begin() + std::ptrdiff_t(k - 1), rank.end());
    for (size_t j = 0; j < k; ++j) out[rank[j].second] = 1;
  }
  std::vector<SftExample> keep, held;
  for (size_t i = 0; i < n; ++i) (out[i] ? held : keep).push_back(std::move(all[i]));
  all = std::move(keep);
  return held;
}

std::vector<std::string> sft_groups(const std::vector<SftExample>& examples) {
  std::vector<std::string> groups;
  for (const SftExample& ex : examples)
    if (std::find(groups.begin(), groups.end(), ex.group) == groups.end()) groups.push_back(ex.group);
  return groups;
}

size_t longest_sft_row(std::initializer_list<const std::vector<SftExample>*> sets) {
  size_t longest = 0;
  for (const auto* set : sets)
    for (const SftExample& ex : *set) longest = std::max(longest, ex.ids.size() > 0 ? ex.ids.size() - 1 : 0);
  return longest;
}

data::Batch sft_batch(const std::vector<SftExample>& examples, std::span<const size_t> which, uint32_t pad_id,
                      size_t row_length) {
  TG_CHECK(!which.empty(), "sft_batch: no examples");
  size_t longest = row_length;
  for (size_t i : which) {
    TG_CHECK(i < examples.size(), "sft_batch: example {} of {}", i, examples.size());
    TG_CHECK(examples[i].ids.size() >= 2, "{}: an example needs at least 2 tokens", examples[i].where);
    longest = std::max(longest, examples[i].ids.size() - 1);
  }
  const auto rows = int64_t(which.size()), cols = int64_t(longest);
  std::vector<int64_t> inputs(size_t(rows * cols), int64_t(pad_id)), targets(size_t(rows * cols), kIgnoreIndex);
  for (int64_t r = 0; r < rows; ++r) {
    const SftExample& ex = examples[which[size_t(r)]];
    const std::vector<int64_t> t = ex.targets();
    for (size_t c = 0; c + 1 < ex.ids.size(); ++c) {
      inputs[size_t(r * cols) + c] = int64_t(ex.ids[c]);
      targets[size_t(r * cols) + c] = t[c];
    }
  }
  return {from_vector(inputs, {rows, cols}), from_vector(targets, {rows, cols})};
}

}  // namespace tapegrad::lm
