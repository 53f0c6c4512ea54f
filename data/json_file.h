// json_file.h — a JSON file read and parsed, with one error shape for every reader of JSON files
// (vocab.json, tokenizer.json, a Hugging Face config.json): "<who>: <path> is not valid JSON: …".
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tapegrad::data {

// Throws tapegrad::Error when the file cannot be read (file_io.h) or is not valid JSON.
nlohmann::json read_json_file(const std::string& path, std::string_view who);

// nlohmann's message without its internals: "[json.exception.parse_error.101] parse error at line 1, column 3: …"
// → "parse error at column 3: …" (the line is named by the caller where a file has many).
std::string json_error_reason(const char* what);

}  // namespace tapegrad::data
