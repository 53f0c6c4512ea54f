// json_file.h — a JSON file read and parsed, with one error shape for every reader of JSON files
// (vocab.json, tokenizer.json, a Hugging Face config.json): "<who>: <path> is not valid JSON: …".
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tapegrad::data {

// Throws tapegrad::Error when the file cannot be read (file_io.h) or is not valid JSON.
nlohmann::json read_json_file(const std::string& path, std::string_view who);

}  // namespace tapegrad::data
