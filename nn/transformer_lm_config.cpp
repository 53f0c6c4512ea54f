// transformer_lm_config.cpp — TransformerLMConfig ↔ string map (the `config.<key>` entries of a
// checkpoint). Exact: integers in decimal, doubles via autograd/io/exact_number.h, so the bits
// come back unchanged.
#include <cstring>
#include <vector>

#include "autograd/io/exact_number.h"
#include "nn/transformer_lm.h"

namespace tapegrad::nn {

std::map<std::string, std::string> TransformerLMConfig::to_config_map() const {
  return {
      {"vocab_size", fmt::format("{}", vocab_size)},
      {"context_length", fmt::format("{}", context_length)},
      {"d_model", fmt::format("{}", d_model)},
      {"n_layers", fmt::format("{}", n_layers)},
      {"n_heads", fmt::format("{}", n_heads)},
      {"n_kv_heads", fmt::format("{}", n_kv_heads)},
      {"d_ff", fmt::format("{}", d_ff)},
      {"rope_theta", format_exact(rope_theta)},
      {"tie_embeddings", tie_embeddings ? "true" : "false"},
      {"eps", format_exact(eps)},
      {"dtype", dtype_name(dtype)},
  };
}

TransformerLMConfig TransformerLMConfig::from_config_map(const std::map<std::string, std::string>& map) {
  TransformerLMConfig c;
  std::vector<std::string> problems;
  std::map<std::string, bool> used;
  for (const auto& [k, v] : map) used[k] = false;
  auto find = [&](const char* key) -> const std::string* {
    auto it = map.find(key);
    if (it == map.end()) {
      problems.push_back(fmt::format("'{}' is missing", key));
      return nullptr;
    }
    used[key] = true;
    return &it->second;
  };
  auto int_field = [&](const char* key, int64_t& out) {
    if (const std::string* v = find(key); v && !parse_exact(*v, out))
      problems.push_back(fmt::format("'{}' = '{}' is not an integer", key, *v));
  };
  auto double_field = [&](const char* key, double& out) {
    if (const std::string* v = find(key); v && !parse_exact(*v, out))
      problems.push_back(fmt::format("'{}' = '{}' is not a number", key, *v));
  };
  int_field("vocab_size", c.vocab_size);
  int_field("context_length", c.context_length);
  int_field("d_model", c.d_model);
  int_field("n_layers", c.n_layers);
  int_field("n_heads", c.n_heads);
  int_field("n_kv_heads", c.n_kv_heads);
  int_field("d_ff", c.d_ff);
  double_field("rope_theta", c.rope_theta);
  double_field("eps", c.eps);
  if (const std::string* v = find("tie_embeddings")) {
    if (*v == "true" || *v == "false")
      c.tie_embeddings = *v == "true";
    else
      problems.push_back(fmt::format("'tie_embeddings' = '{}' is not true or false", *v));
  }
  if (const std::string* v = find("dtype")) {
    if (*v == dtype_name(kFloat32))
      c.dtype = kFloat32;
    else if (*v == dtype_name(kFloat64))
      c.dtype = kFloat64;
    else if (*v == dtype_name(kBFloat16))
      c.dtype = kBFloat16;
    else
      problems.push_back(fmt::format("'dtype' = '{}' is not float32, float64 or bfloat16", *v));
  }
  for (const auto& [k, was_used] : used)
    if (!was_used) problems.push_back(fmt::format("unknown key '{}'", k));
  if (!problems.empty()) {
    std::string msg = "TransformerLMConfig::from_config_map:";
    for (size_t i = 0; i < problems.size(); ++i) msg += (i ? ", " : " ") + problems[i];
    throw Error(msg);
  }
  return c;
}

}  // namespace tapegrad::nn
