// text_inputs.cpp — paths and directories to the ordered list of input files; a JSONL line to its
// document (see text_inputs.h).
#include "data/text_inputs.h"

#include "data/json_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "kernels/error.h"

namespace tapegrad::data {
namespace {

namespace fs = std::filesystem;

std::string lowercase(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return s;
}

TextFormat format_by_name(const fs::path& path) {
  return lowercase(path.extension().string()) == ".jsonl" ? TextFormat::jsonl : TextFormat::plain;
}

// A file a directory contributes: by its extension (text_inputs.h).
bool is_text_file_name(const fs::path& path) {
  const std::string ext = lowercase(path.extension().string());
  return ext == ".txt" || ext == ".text" || ext == ".md" || ext == ".jsonl";
}

TextInput input_file(const std::string& path, std::string_view flag) {
  TG_CHECK(std::ifstream(path, std::ios::binary).good(), "{}: cannot open {} for reading", flag, path);
  std::error_code error;
  const uint64_t bytes = fs::file_size(path, error);
  return {path, format_by_name(path), error ? 0 : bytes};
}

void add_directory(const std::string& dir, std::string_view flag, std::vector<TextInput>& out) {
  std::vector<std::string> relative;  // generic ('/'-separated) paths below dir
  std::error_code error;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, error), end;
  TG_CHECK(!error, "{}: cannot list the directory {}: {}", flag, dir, error.message());
  for (; it != end; it.increment(error)) {
    TG_CHECK(!error, "{}: cannot list the directory {}: {}", flag, dir, error.message());
    const fs::path& path = it->path();
    if (path.filename().string().starts_with(".")) {
      if (it->is_directory(error)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(error) && is_text_file_name(path))
      relative.push_back(path.lexically_relative(dir).generic_string());
  }
  TG_CHECK(!relative.empty(), "{}: the directory {} holds no text file (*.txt, *.text, *.md or *.jsonl; hidden ones skipped)",
           flag, dir);
  std::sort(relative.begin(), relative.end());  // bytewise: std::string compares chars as unsigned
  for (const std::string& r : relative) out.push_back(input_file((fs::path(dir) / r).string(), flag));
}

}  // namespace

std::vector<TextInput> resolve_text_inputs(const std::vector<std::string>& given, std::string_view flag) {
  TG_CHECK(!given.empty(), "{}: no input given", flag);
  std::vector<TextInput> out;
  for (const std::string& path : given) {
    TG_CHECK(!path.empty(), "{}: an empty path", flag);
    std::error_code error;
    const fs::file_status status = fs::status(path, error);
    TG_CHECK(fs::exists(status), "{}: cannot open {}: no such file or directory", flag, path);
    if (fs::is_directory(status)) {
      add_directory(path, flag, out);
    } else {
      TG_CHECK(fs::is_regular_file(status), "{}: {} is not a regular file or a directory", flag, path);
      out.push_back(input_file(path, flag));
    }
  }
  return out;
}

uint64_t total_bytes(const std::vector<TextInput>& inputs) {
  uint64_t sum = 0;
  for (const TextInput& input : inputs) sum += input.bytes;
  return sum;
}

std::string describe_inputs(const std::vector<std::string>& given) { return fmt::format("{}", fmt::join(given, ", ")); }

std::optional<std::string> jsonl_document(std::string_view line, std::string_view field, std::string_view file,
                                          uint64_t line_number) {
  if (line.find_first_not_of(" \t\r\n") == std::string_view::npos) return std::nullopt;
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}:{}: not valid JSON ({})", file, line_number, json_error_reason(e.what())));
  }
  TG_CHECK(json.is_object(), "{}:{}: expected a JSON object with a string field \"{}\", got a JSON {}", file,
           line_number, field, json.type_name());
  const auto it = json.find(std::string(field));
  TG_CHECK(it != json.end(), "{}:{}: no field \"{}\" in this JSON object (choose the field with --text-field)", file,
           line_number, field);
  TG_CHECK(it->is_string(), "{}:{}: field \"{}\" is a JSON {}, not a string", file, line_number, field,
           it->type_name());
  return it->get<std::string>();
}

}  // namespace tapegrad::data
