// config_json.cpp — typed values for config.json (see config_json.h).
#include "lm/config_json.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

namespace tapegrad::lm {
namespace {

using json = nlohmann::ordered_json;

// Options whose values are text even when they look like numbers (a directory named "2024").
const std::set<std::string> kTextKeys = {"out_dir", "device", "precision", "cuda_graph"};

// "true"/"false" → a boolean; a whole number → an integer; a number that reads back exactly → a double;
// anything else stays the string it is.
json typed(const std::string& key, const std::string& v) {
  if (kTextKeys.count(key) || v.empty()) return v;
  if (v == "true" || v == "false") return v == "true";
  const char* end = v.data() + v.size();
  if (v.find_first_not_of("-0123456789") == std::string::npos) {
    int64_t i = 0;
    if (auto r = std::from_chars(v.data(), end, i); r.ec == std::errc() && r.ptr == end) return i;
    uint64_t u = 0;
    if (auto r = std::from_chars(v.data(), end, u); r.ec == std::errc() && r.ptr == end) return u;
    return v;
  }
  double d = 0;
  if (auto r = std::from_chars(v.data(), end, d); r.ec == std::errc() && r.ptr == end && std::isfinite(d)) return d;
  return v;
}

json typed_section(const std::map<std::string, std::string>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = typed(k, v);
  return out;
}

}  // namespace

std::string run_config_json(const std::map<std::string, std::string>& model,
                            const std::map<std::string, std::string>& train,
                            const std::map<std::string, std::string>& run, int64_t parameters) {
  json config;
  config["model"] = typed_section(model);
  config["train"] = typed_section(train);
  config["run"] = run;
  config["parameters"] = parameters;
  return config.dump(2) + "\n";
}

}  // namespace tapegrad::lm
