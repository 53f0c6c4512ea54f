// json_file.cpp — read_whole_file + nlohmann::json::parse (see json_file.h).
#include "data/json_file.h"

#include "data/file_io.h"
#include "kernels/error.h"

namespace tapegrad::data {

nlohmann::json read_json_file(const std::string& path, std::string_view who) {
  const std::string text = read_whole_file(path, who);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: {} is not valid JSON: {}", who, path, json_error_reason(e.what())));
  }
}

std::string json_error_reason(const char* what) {
  std::string s = what;
  if (s.starts_with("[json.exception.")) {
    const size_t close = s.find("] ");
    if (close != std::string::npos) s = s.substr(close + 2);
  }
  const size_t at_line = s.find(" at line 1, ");
  if (at_line != std::string::npos) s.replace(at_line, 12, " at ");
  return s;
}

}  // namespace tapegrad::data
