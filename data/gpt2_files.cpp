// gpt2_files.cpp — vocab.json through nlohmann::json (ordered by id on write), merges.txt by lines.
#include "data/gpt2_files.h"

#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "data/byte_unicode.h"
#include "kernels/error.h"

namespace tapegrad::data {
namespace {

std::string read_file(const std::string& path, std::string_view who) {
  std::ifstream in(path, std::ios::binary);
  TG_CHECK(in.good(), "{}: cannot open {}", who, path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  TG_CHECK(!in.bad(), "{}: error reading {}", who, path);
  return buffer.str();
}

nlohmann::json parse_json_file(const std::string& path, std::string_view who) {
  const std::string text = read_file(path, who);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: {} is not valid JSON: {}", who, path, e.what()));
  }
}

// {"byte-unicode token": id, ...} -> id -> bytes; `extra_ids` more ids (added tokens) may fill gaps.
std::vector<std::string> parse_vocab_object(const nlohmann::json& json, const std::string& path, size_t extra_ids = 0) {
  TG_CHECK(json.is_object(), "load_gpt2_files: {}: expected a JSON object of token -> id", path);
  const size_t n = json.size() + extra_ids;
  std::vector<std::string> vocab(n);
  std::vector<bool> seen(n, false);
  for (const auto& [key, value] : json.items()) {
    TG_CHECK(value.is_number_integer(), "load_gpt2_files: {}: token \"{}\": id is not an integer", path, key);
    const auto id = value.get<int64_t>();
    TG_CHECK(id >= 0 && size_t(id) < n, "load_gpt2_files: {}: token \"{}\": id {} outside 0..{}", path, key, id,
             n - 1);
    TG_CHECK(!seen[id], "load_gpt2_files: {}: id {} is used twice", path, id);
    seen[id] = true;
    vocab[id] = gpt2_unicode_to_bytes(key, fmt::format("load_gpt2_files: {}: token \"{}\"", path, key));
  }
  if (extra_ids == 0) return vocab;
  vocab.resize(n);  // ids not seen are filled by the caller and checked there
  return vocab;
}

std::vector<std::string> parse_vocab_json(const std::string& path) {
  return parse_vocab_object(parse_json_file(path, "load_gpt2_files"), path);
}

// One merges entry of tokenizer.json: "left right" or ["left", "right"].
std::pair<std::string, std::string> parse_hf_merge(const nlohmann::json& entry, const std::string& path, size_t index) {
  const std::string where = fmt::format("load_hf_tokenizer_json: {}: model.merges[{}]", path, index);
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

}  // namespace

BpeModel load_gpt2_files(const std::string& vocab_json_path, const std::string& merges_txt_path,
                         const std::vector<std::string>& special_tokens) {
  BpeModel model;
  model.vocab = parse_vocab_json(vocab_json_path);
  std::unordered_set<std::string_view> known(model.vocab.begin(), model.vocab.end());
  for (const std::string& special : special_tokens)
    TG_CHECK(known.count(special), "load_gpt2_files: special token \"{}\" is not in {}", special, vocab_json_path);
  model.special_tokens = special_tokens;

  const std::string text = read_file(merges_txt_path, "load_gpt2_files");
  std::istringstream lines(text);
  std::string line;
  size_t line_number = 0;
  while (std::getline(lines, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line_number == 1 && line.starts_with("#version")) continue;
    const size_t space = line.find(' ');
    TG_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                 line.find(' ', space + 1) == std::string::npos,
             "load_gpt2_files: {} line {}: expected two tokens separated by one space, got \"{}\"", merges_txt_path,
             line_number, line);
    const std::string where = fmt::format("load_gpt2_files: {} line {}", merges_txt_path, line_number);
    std::string left = gpt2_unicode_to_bytes(std::string_view(line).substr(0, space), where);
    std::string right = gpt2_unicode_to_bytes(std::string_view(line).substr(space + 1), where);
    TG_CHECK(known.count(left) && known.count(right) && known.count(left + right),
             "{}: merge \"{}\" names a token that is not in {} (left, right and their concatenation must all be)",
             where, line, vocab_json_path);
    model.merges.emplace_back(std::move(left), std::move(right));
  }
  return model;
}

BpeModel load_hf_tokenizer_json(const std::string& path) {
  const nlohmann::json json = parse_json_file(path, "load_hf_tokenizer_json");
  TG_CHECK(json.is_object() && json.contains("model") && json["model"].is_object(),
           "load_hf_tokenizer_json: {}: no \"model\" object", path);
  const nlohmann::json& model_json = json["model"];
  TG_CHECK(model_json.value("type", std::string("BPE")) == "BPE", "load_hf_tokenizer_json: {}: model.type is \"{}\", not BPE",
           path, model_json.value("type", std::string()));
  TG_CHECK(model_json.contains("vocab") && model_json.contains("merges") && model_json["merges"].is_array(),
           "load_hf_tokenizer_json: {}: model needs \"vocab\" and a \"merges\" array", path);
  const nlohmann::json added = json.value("added_tokens", nlohmann::json::array());
  TG_CHECK(added.is_array(), "load_hf_tokenizer_json: {}: added_tokens is not an array", path);

  // Added tokens are raw text (not byte-unicode); those whose id is missing from model.vocab extend it.
  std::vector<std::pair<uint64_t, std::string>> added_tokens;
  std::vector<std::string> specials;
  for (size_t i = 0; i < added.size(); ++i) {
    const nlohmann::json& t = added[i];
    TG_CHECK(t.is_object() && t.contains("id") && t["id"].is_number_unsigned() && t.contains("content") &&
                 t["content"].is_string() && !t["content"].get<std::string>().empty(),
             "load_hf_tokenizer_json: {}: added_tokens[{}] needs an unsigned \"id\" and a non-empty \"content\"", path,
             i);
    added_tokens.emplace_back(t["id"].get<uint64_t>(), t["content"].get<std::string>());
    if (t.value("special", false)) specials.push_back(t["content"].get<std::string>());
  }
  const nlohmann::json& vocab_json = model_json["vocab"];
  TG_CHECK(vocab_json.is_object(), "load_hf_tokenizer_json: {}: model.vocab is not an object", path);
  size_t extra = 0;
  {
    std::unordered_set<uint64_t> vocab_ids;
    for (const auto& [key, value] : vocab_json.items())
      if (value.is_number_unsigned()) vocab_ids.insert(value.get<uint64_t>());
    std::unordered_set<uint64_t> extra_ids;
    for (const auto& [id, content] : added_tokens)
      if (!vocab_ids.count(id)) extra_ids.insert(id);
    extra = extra_ids.size();
  }
  BpeModel model;
  model.vocab = parse_vocab_object(vocab_json, path, extra);
  std::vector<bool> filled(model.vocab.size(), false);
  for (const auto& [key, value] : vocab_json.items()) filled[value.get<size_t>()] = true;
  for (const auto& [id, content] : added_tokens) {
    TG_CHECK(id < model.vocab.size(), "load_hf_tokenizer_json: {}: added token \"{}\" has id {} outside 0..{}", path,
             content, id, model.vocab.size() - 1);
    TG_CHECK(!filled[id] || model.vocab[id] == content,
             "load_hf_tokenizer_json: {}: added token \"{}\" has id {}, which model.vocab gives to another token", path,
             content, id);
    model.vocab[id] = content;
    filled[id] = true;
  }
  for (size_t id = 0; id < filled.size(); ++id)
    TG_CHECK(filled[id], "load_hf_tokenizer_json: {}: no token has id {}", path, id);

  std::unordered_set<std::string_view> known(model.vocab.begin(), model.vocab.end());
  const nlohmann::json& merges = model_json["merges"];
  for (size_t i = 0; i < merges.size(); ++i) {
    auto merge = parse_hf_merge(merges[i], path, i);
    TG_CHECK(known.count(merge.first) && known.count(merge.second) && known.count(merge.first + merge.second),
             "load_hf_tokenizer_json: {}: model.merges[{}] names a token that is not in the vocabulary", path, i);
    model.merges.push_back(std::move(merge));
  }
  model.special_tokens = std::move(specials);
  return model;
}

void save_gpt2_files(const BpeModel& model, const std::string& vocab_json_path, const std::string& merges_txt_path) {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  for (size_t id = 0; id < model.vocab.size(); ++id) {
    const std::string key = bytes_to_gpt2_unicode(model.vocab[id]);
    TG_CHECK(!json.contains(key), "save_gpt2_files: ids {} and {} have the same bytes; vocab.json cannot hold both",
             json[key].get<size_t>(), id);
    json[key] = id;
  }
  std::ofstream vocab_out(vocab_json_path, std::ios::binary);
  TG_CHECK(vocab_out.good(), "save_gpt2_files: cannot create {}", vocab_json_path);
  vocab_out << json.dump(1) << '\n';
  TG_CHECK(vocab_out.good(), "save_gpt2_files: error writing {}", vocab_json_path);

  std::ofstream merges_out(merges_txt_path, std::ios::binary);
  TG_CHECK(merges_out.good(), "save_gpt2_files: cannot create {}", merges_txt_path);
  merges_out << "#version: 0.2\n";
  for (const auto& [left, right] : model.merges)
    merges_out << bytes_to_gpt2_unicode(left) << ' ' << bytes_to_gpt2_unicode(right) << '\n';
  TG_CHECK(merges_out.good(), "save_gpt2_files: error writing {}", merges_txt_path);
}

}  // namespace tapegrad::data
