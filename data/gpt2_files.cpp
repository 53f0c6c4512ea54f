// gpt2_files.cpp — vocab.json through nlohmann::json (ordered by id on write), merges.txt by lines;
// both written atomically (file_io.h).
#include "data/gpt2_files.h"

#include <sstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "data/byte_unicode.h"
#include "data/file_io.h"
#include "data/json_file.h"
#include "kernels/error.h"

namespace tapegrad::data {
namespace {

// {"byte-unicode token": id, ...} -> id -> bytes.
std::vector<std::string> parse_vocab_object(const nlohmann::json& json, const std::string& path) {
  TG_CHECK(json.is_object(), "tokenizer {}: expected a JSON object of token -> id", path);
  const size_t n = json.size();
  std::vector<std::string> vocab(n);
  std::vector<bool> seen(n, false);
  for (const auto& [key, value] : json.items()) {
    TG_CHECK(value.is_number_integer(), "tokenizer {}: token \"{}\": id is not an integer", path, key);
    const auto id = value.get<int64_t>();
    TG_CHECK(id >= 0 && size_t(id) < n, "tokenizer {}: token \"{}\": id {} outside 0..{}", path, key, id,
             n - 1);
    TG_CHECK(!seen[id], "tokenizer {}: id {} is used twice", path, id);
    seen[id] = true;
    vocab[id] = gpt2_unicode_to_bytes(key, fmt::format("tokenizer {}: token \"{}\"", path, key));
  }
  return vocab;
}

std::vector<std::string> parse_vocab_json(const std::string& path) {
  return parse_vocab_object(read_json_file(path, "tokenizer"), path);
}

}  // namespace

BpeModel load_gpt2_files(const std::string& vocab_json_path, const std::string& merges_txt_path,
                         const std::vector<std::string>& special_tokens) {
  BpeModel model;
  model.vocab = parse_vocab_json(vocab_json_path);
  std::unordered_set<std::string_view> known(model.vocab.begin(), model.vocab.end());
  for (const std::string& special : special_tokens)
    TG_CHECK(known.count(special), "tokenizer: special token \"{}\" is not in {}", special, vocab_json_path);
  model.special_tokens = special_tokens;

  const std::string text = read_whole_file(merges_txt_path, "load_gpt2_files");
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
             "tokenizer {} line {}: expected two tokens separated by one space, got \"{}\"", merges_txt_path,
             line_number, line);
    const std::string where = fmt::format("tokenizer {} line {}", merges_txt_path, line_number);
    std::string left = gpt2_unicode_to_bytes(std::string_view(line).substr(0, space), where);
    std::string right = gpt2_unicode_to_bytes(std::string_view(line).substr(space + 1), where);
    TG_CHECK(known.count(left) && known.count(right) && known.count(left + right),
             "{}: merge \"{}\" names a token that is not in {} (left, right and their concatenation must all be)",
             where, line, vocab_json_path);
    model.merges.emplace_back(std::move(left), std::move(right));
  }
  return model;
}

void save_gpt2_files(const BpeModel& model, const std::string& vocab_json_path, const std::string& merges_txt_path) {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  for (size_t id = 0; id < model.vocab.size(); ++id) {
    const std::string key = bytes_to_gpt2_unicode(model.vocab[id]);
    TG_CHECK(!json.contains(key), "writing vocab.json: ids {} and {} have the same bytes; vocab.json cannot hold both",
             json[key].get<size_t>(), id);
    json[key] = id;
  }
  std::string merges = "#version: 0.2\n";
  for (const auto& [left, right] : model.merges)
    merges += bytes_to_gpt2_unicode(left) + ' ' + bytes_to_gpt2_unicode(right) + '\n';
  write_file_atomic(vocab_json_path, json.dump(1) + '\n', "save_gpt2_files");
  write_file_atomic(merges_txt_path, merges, "save_gpt2_files");
}

}  // namespace tapegrad::data
