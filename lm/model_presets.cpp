// model_presets.cpp — the named model sizes and the FLOP count (see model_presets.h).
#include "lm/model_presets.h"

#include "kernels/error.h"

namespace tapegrad::lm {

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"micro", 512, 64, 64, 2, 4, 172, 32},
      {"small", 10000, 128, 256, 4, 8, 688, 16},
      {"tiny", 10000, 256, 512, 4, 16, 1344, 8},
  };
  return presets;
}

const ModelPreset& model_preset(const std::string& name) {
  std::string names;
  for (const ModelPreset& p : model_presets()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  throw Error(fmt::format("unknown model preset '{}' (presets: {})", name, names));
}

nn::TransformerLMConfig preset_config(const std::string& name, int64_t vocab_size) {
  const ModelPreset& p = model_preset(name);
  nn::TransformerLMConfig c;
  c.vocab_size = vocab_size > 0 ? vocab_size : p.vocab_size;
  c.context_length = p.context_length;
  c.d_model = p.d_model;
  c.n_layers = p.n_layers;
  c.n_heads = p.n_heads;
  c.n_kv_heads = p.n_heads;
  c.d_ff = p.d_ff;
  return c;
}

double flops_per_token(const nn::TransformerLMConfig& c) {
  const double C = double(c.d_model), L = double(c.n_layers), T = double(c.context_length);
  const double kv = double(c.n_kv_heads > 0 ? c.n_kv_heads : c.n_heads), D = C / double(c.n_heads);
  const double n_mm = L * (2 * C * C + 2 * C * kv * D + 3 * C * double(c.d_ff)) + C * double(c.vocab_size);
  return 6.0 * n_mm + 12.0 * L * T * C;
}

}  // namespace tapegrad::lm
