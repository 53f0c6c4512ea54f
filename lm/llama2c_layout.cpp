// llama2c_layout.cpp — the table of llama2.c's arrays and their order per version (see llama2c_layout.h).
#include "lm/llama2c_layout.h"

#include <algorithm>

#include "kernels/error.h"

namespace tapegrad::lm {

std::vector<Llama2cArray> llama2c_layout(int version, const Llama2cSizes& s) {
  const int64_t C = s.dim, F = s.hidden, V = s.vocab, D = s.dim / s.n_heads, KV = s.n_kv_heads * D;
  const std::vector<Llama2cArray> table = {
      {"token_embedding", "token_embeddings.weight", {V, C}, false, "dim"},
      {"rms_att", "layers.{}.ln1.weight", {C}, true},
      {"wq", "layers.{}.attn.q_proj.weight", {C, C}, true, "dim"},
      {"wk", "layers.{}.attn.k_proj.weight", {KV, C}, true, "dim"},
      {"wv", "layers.{}.attn.v_proj.weight", {KV, C}, true, "dim"},
      {"wo", "layers.{}.attn.output_proj.weight", {C, C}, true, "dim"},
      {"rms_ffn", "layers.{}.ln2.weight", {C}, true},
      {"w1", "layers.{}.ffn.w1.weight", {F, C}, true, "dim"},
      {"w2", "layers.{}.ffn.w2.weight", {C, F}, true, "hidden_dim"},
      {"w3", "layers.{}.ffn.w3.weight", {F, C}, true, "dim"},
      {"rms_final", "ln_final.weight", {C}},
      {"freq_cis_real", "", {s.seq, D / 2}},
      {"freq_cis_imag", "", {s.seq, D / 2}},
      {"wcls", "lm_head.weight", {V, C}, false, "dim"},
  };
  std::vector<const char*> order =
      version == 0 ? std::vector<const char*>{"token_embedding", "rms_att", "wq", "wk", "wv", "wo", "rms_ffn", "w1",
                                              "w2", "w3", "rms_final", "freq_cis_real", "freq_cis_imag"}
                   : std::vector<const char*>{"rms_att", "rms_ffn", "rms_final", "token_embedding", "wq", "wk", "wv",
                                              "wo", "w1", "w2", "w3"};
  if (!s.shared) order.push_back("wcls");
  std::vector<Llama2cArray> out;
  for (const char* what : order) {
    const auto it = std::find_if(table.begin(), table.end(), [&](const Llama2cArray& a) { return a.what == what; });
    TG_CHECK(it != table.end(), "llama2c: internal: no array '{}'", what);
    out.push_back(*it);
  }
  return out;
}

std::string llama2c_layer_name(const std::string& pattern, int64_t layer) {
  std::string s = pattern;
  const auto at = s.find("{}");
  if (at != std::string::npos) s.replace(at, 2, std::to_string(layer));
  return s;
}

}  // namespace tapegrad::lm
