// hf_tokenizer_json.cpp — tokenizer.json through nlohmann::json: the loader reads the model and the
// added tokens; the writer emits the byte-level BPE pipeline that `tokenizers` runs like our Tokenizer.
#include "data/hf_tokenizer_json.h"

#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "data/byte_unicode.h"
#include "data/file_io.h"
#include "data/json_file.h"
#include "data/utf8.h"
#include "kernels/error.h"

namespace tapegrad::data {
namespace {

// One merges entry of tokenizer.json: "left right" or ["left", "right"].
std::pair<std::string, std::string> parse_merge(const nlohmann::json& entry, const std::string& path, size_t index) {
  const std::string where = fmt::format("tokenizer {}: model.merges[{}]", path, index);
  std::string left, right;
  if (entry.is_string()) {
    const std::string line = entry.get<std::string>();
    const size_t space = line.find(' ');
    TG_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                 line.find(' ', space + 1) == std::string::npos,
             "{}: expected \"left right\", got \"{}\"", where, line);
    left = line.substr(0, space), right = line.substr(space + 1);
  } else {
    TG_CHECK(entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string(),
             "{}: expected a string or a pair of strings", where);
    left = entry[0].get<std::string>(), right = entry[1].get<std::string>();
  }
  return {gpt2_unicode_to_bytes(left, where), gpt2_unicode_to_bytes(right, where)};
}

// id -> bytes from model.vocab (byte-unicode keys) and the added tokens (raw text, which wins for its id).
std::vector<std::string> parse_vocab(const nlohmann::json& vocab_json, const std::unordered_map<uint64_t, std::string>& added,
                                     const std::string& path) {
  TG_CHECK(vocab_json.is_object(), "tokenizer {}: model.vocab is not an object", path);
  size_t n = vocab_json.size();
  {  // added tokens whose id model.vocab does not use extend the vocabulary
    std::unordered_set<uint64_t> vocab_ids;
    for (const auto& [key, value] : vocab_json.items())
      if (value.is_number_unsigned()) vocab_ids.insert(value.get<uint64_t>());
    for (const auto& [id, content] : added) n += vocab_ids.count(id) ? 0 : 1;
  }
  std::vector<std::string> vocab(n);
  std::vector<bool> filled(n, false);
  for (const auto& [key, value] : vocab_json.items()) {
    TG_CHECK(value.is_number_integer(), "tokenizer {}: model.vocab \"{}\": id is not an integer", path,
             key);
    const auto id = value.get<int64_t>();
    TG_CHECK(id >= 0 && size_t(id) < n, "tokenizer {}: model.vocab \"{}\": id {} outside 0..{}", path,
             key, id, n - 1);
    TG_CHECK(!filled[id], "tokenizer {}: id {} is used twice", path, id);
    filled[id] = true;
    if (const auto it = added.find(uint64_t(id)); it != added.end()) {
      TG_CHECK(key == it->second || key == bytes_to_gpt2_unicode(it->second),
               "tokenizer {}: added token \"{}\" has id {}, which model.vocab gives to \"{}\"", path,
               it->second, id, key);
      vocab[id] = it->second;
    } else {
      vocab[id] = gpt2_unicode_to_bytes(key, fmt::format("tokenizer {}: model.vocab \"{}\"", path, key));
    }
  }
  for (const auto& [id, content] : added) {
    TG_CHECK(id < n, "tokenizer {}: added token \"{}\" has id {} outside 0..{}", path, content, id, n - 1);
    vocab[id] = content;
    filled[id] = true;
  }
  for (size_t id = 0; id < n; ++id) TG_CHECK(filled[id], "tokenizer {}: no token has id {}", path, id);
  return vocab;
}

nlohmann::ordered_json byte_level(bool trim_offsets) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", trim_offsets}, {"use_regex", true}};
}

}  // namespace

BpeModel load_hf_tokenizer_json(const std::string& path) {
  const nlohmann::json json = read_json_file(path, "tokenizer");
  TG_CHECK(json.is_object() && json.contains("model") && json["model"].is_object(),
           "tokenizer {}: no \"model\" object", path);
  const nlohmann::json& model_json = json["model"];
  TG_CHECK(!model_json.contains("type") || model_json["type"] == "BPE",  // (a non-string type is no "BPE" either)
           "tokenizer {}: model.type is {}, not BPE", path, model_json.value("type", nlohmann::json()).dump());
  TG_CHECK(model_json.contains("vocab") && model_json.contains("merges") && model_json["merges"].is_array(),
           "tokenizer {}: model needs \"vocab\" and a \"merges\" array", path);
  const nlohmann::json added_json = json.value("added_tokens", nlohmann::json::array());
  TG_CHECK(added_json.is_array(), "tokenizer {}: added_tokens is not an array", path);

  std::unordered_map<uint64_t, std::string> added;  // id -> raw text
  BpeModel model;
  for (size_t i = 0; i < added_json.size(); ++i) {
    const nlohmann::json& t = added_json[i];
    TG_CHECK(t.is_object() && t.contains("id") && t["id"].is_number_unsigned() && t.contains("content") &&
                 t["content"].is_string() && !t["content"].get<std::string>().empty(),
             "tokenizer {}: added_tokens[{}] needs an unsigned \"id\" and a non-empty \"content\"", path,
             i);
    const auto id = t["id"].get<uint64_t>();
    const auto content = t["content"].get<std::string>();
    const auto [it, inserted] = added.emplace(id, content);
    TG_CHECK(inserted || it->second == content, "tokenizer {}: added_tokens[{}]: id {} is also \"{}\"",
             path, i, id, it->second);
    TG_CHECK(!t.contains("special") || t["special"].is_boolean(),
             "tokenizer {}: added_tokens[{}]: \"special\" is {}, not true or false", path, i, t["special"].dump());
    if (t.value("special", false)) model.special_tokens.push_back(content);
  }
  model.vocab = parse_vocab(model_json["vocab"], added, path);

  std::unordered_set<std::string_view> known(model.vocab.begin(), model.vocab.end());
  const nlohmann::json& merges = model_json["merges"];
  for (size_t i = 0; i < merges.size(); ++i) {
    auto merge = parse_merge(merges[i], path, i);
    TG_CHECK(known.count(merge.first) && known.count(merge.second) && known.count(merge.first + merge.second),
             "tokenizer {}: model.merges[{}] names a token that is not in the vocabulary", path, i);
    model.merges.push_back(std::move(merge));
  }
  return model;
}

void save_hf_tokenizer_json(const BpeModel& model, const std::string& path) {
  // special token -> its (first) id; in model.vocab under its raw text, which `tokenizers` looks up
  // when it adds the added_tokens, so they keep their ids
  std::unordered_map<std::string_view, size_t> special_ids;
  for (const std::string& special : model.special_tokens) {
    TG_CHECK(!special.empty() && replace_invalid_utf8(special) == special,
             "writing tokenizer {}: special token \"{}\" is empty or not valid UTF-8", path, special);
    for (size_t id = 0; id < model.vocab.size() && !special_ids.count(special); ++id)
      if (model.vocab[id] == special) special_ids.emplace(special, id);
    TG_CHECK(special_ids.count(special), "writing tokenizer {}: special token \"{}\" is not in the vocabulary",
             path, special);
  }
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (size_t id = 0; id < model.vocab.size(); ++id) {
    const auto special = special_ids.find(model.vocab[id]);
    const std::string key = special != special_ids.end() && special->second == id ? model.vocab[id]
                                                                                   : bytes_to_gpt2_unicode(model.vocab[id]);
    TG_CHECK(!vocab.contains(key),
             "writing tokenizer {}: ids {} and {} have the same key \"{}\"; model.vocab cannot hold both", path,
             vocab[key].get<size_t>(), id, key);
    vocab[key] = id;
  }
  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  for (const auto& [left, right] : model.merges)
    merges.push_back(bytes_to_gpt2_unicode(left) + ' ' + bytes_to_gpt2_unicode(right));
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (const std::string& special : model.special_tokens)
    added.push_back({{"id", special_ids.at(special)},
                     {"content", special},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});

  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  json["version"] = "1.0";
  json["truncation"] = nullptr;
  json["padding"] = nullptr;
  json["added_tokens"] = std::move(added);
  json["normalizer"] = nullptr;
  json["pre_tokenizer"] = byte_level(true);
  json["post_processor"] = byte_level(false);
  json["decoder"] = byte_level(true);
  json["model"] = {{"type", "BPE"},
                   {"dropout", nullptr},
                   {"unk_token", nullptr},
                   {"continuing_subword_prefix", nullptr},
                   {"end_of_word_suffix", nullptr},
                   {"fuse_unk", false},
                   {"byte_fallback", false},
                   {"ignore_merges", false},
                   {"vocab", std::move(vocab)},
                   {"merges", std::move(merges)}};
  write_file_atomic(path, json.dump(1) + '\n', "save_hf_tokenizer_json");
}

}  // namespace tapegrad::data
