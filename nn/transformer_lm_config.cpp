// transformer_lm_config.cpp — TransformerLMConfig ↔ string map (the `config.<key>` entries of a
// checkpoint). Exact: integers in decimal, doubles via autograd/io/exact_number.h, so the bits
// come back unchanged.
#include <cmath>
#include <cstring>
#include <vector>

#include "autograd/io/exact_number.h"
#include "nn/relu_squared.h"
#include "nn/transformer_lm.h"

namespace tapegrad::nn {

std::map<std::string, std::string> TransformerLMConfig::to_config_map() const {
  std::map<std::string, std::string> m{
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
  const TransformerLMConfig llama;  // the modern options' defaults
  if (ffn != llama.ffn) m["ffn"] = ffn_kind_name(ffn);
  if (qk_norm != llama.qk_norm) m["qk_norm"] = qk_norm ? "true" : "false";
  if (norm_gain != llama.norm_gain) m["norm_gain"] = norm_gain ? "true" : "false";
  if (embed_norm != llama.embed_norm) m["embed_norm"] = embed_norm ? "true" : "false";
  if (zero_init_projections != llama.zero_init_projections)
    m["zero_init_projections"] = zero_init_projections ? "true" : "false";
  if (logit_softcap != llama.logit_softcap) m["logit_softcap"] = format_exact(logit_softcap);
  return m;
}

std::vector<std::string> TransformerLMConfig::non_llama_options() const {
  std::vector<std::string> out;
  if (ffn != FFNKind::SwiGLU) out.push_back(fmt::format("--ffn {}", ffn_kind_name(ffn)));
  if (qk_norm) out.push_back("--qk-norm true");
  if (!norm_gain) out.push_back("--norm-gain false");
  if (embed_norm) out.push_back("--embed-norm true");
  if (logit_softcap != 0) out.push_back(fmt::format("--logit-softcap {}", logit_softcap));
  return out;
}

double TransformerLMConfig::parameter_count() const {
  const double C = double(d_model), V = double(vocab_size), L = double(n_layers);
  const double F = double(d_ff > 0 ? d_ff : default_d_ff(ffn, d_model));
  const double D = C / double(n_heads), KV = double(n_kv_heads > 0 ? n_kv_heads : n_heads) * D;
  const double gain = norm_gain ? 1 : 0;
  const double block = gain * (2 * C + (qk_norm ? 2 * D : 0))     // ln1, ln2 (q_norm, k_norm)
                       + 2 * C * C + 2 * C * KV                    // q, output; k, v
                       + (ffn == FFNKind::ReLU2 ? 2 : 3) * C * F;  // w1, w2 (w3)
  return V * C * (tie_embeddings ? 1 : 2) + gain * C * (embed_norm ? 2 : 1) + L * block;
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
  auto bool_field = [&](const char* key, bool& out) {
    if (const std::string* v = find(key)) {
      if (*v == "true" || *v == "false")
        out = *v == "true";
      else
        problems.push_back(fmt::format("'{}' = '{}' is not true or false", key, *v));
    }
  };
  // A modern option: absent means its default (checkpoints from before the options existed).
  auto optional = [&](const char* key, auto&& read) {
    if (map.count(key)) read(key);
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
  bool_field("tie_embeddings", c.tie_embeddings);
  optional("ffn", [&](const char* key) {
    const std::string* v = find(key);
    if (*v == "swiglu" || *v == "relu2")
      c.ffn = ffn_kind_from_string(*v);
    else
      problems.push_back(fmt::format("'ffn' = '{}' is not swiglu or relu2", *v));
  });
  optional("qk_norm", [&](const char* key) { bool_field(key, c.qk_norm); });
  optional("norm_gain", [&](const char* key) { bool_field(key, c.norm_gain); });
  optional("embed_norm", [&](const char* key) { bool_field(key, c.embed_norm); });
  optional("zero_init_projections", [&](const char* key) { bool_field(key, c.zero_init_projections); });
  optional("logit_softcap", [&](const char* key) {
    double_field(key, c.logit_softcap);
    if (!(c.logit_softcap >= 0) || std::isinf(c.logit_softcap))
      problems.push_back(fmt::format("'logit_softcap' = '{}' is not a finite number ≥ 0", map.at(key)));
  });
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
