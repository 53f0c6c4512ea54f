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
    throw Error(fmt::format("{}: {} is not valid JSON: {}", who, path, e.what()));
  }
}

}  // namespace tapegrad::data
