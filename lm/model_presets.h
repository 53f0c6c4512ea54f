// model_presets.h — the named model sizes of ../shared/bench/README.md (micro, small, tiny) and the
// model FLOP count used for throughput figures.
//
//   nn::TransformerLMConfig c = lm::preset_config("micro", /*vocab_size=*/512);
//   double f = lm::flops_per_token(model.config);   // 6·N_mm + 12·L·T·C
#pragma once
#include <string>
#include <vector>

#include "nn/transformer_lm.h"

namespace tapegrad::lm {

struct ModelPreset {
  std::string name;
  int64_t vocab_size, context_length, d_model, n_layers, n_heads, d_ff, batch_size;
};

// micro (V 512, T 64, C 64, L 2, H 4, F 172, B 32), small (10000, 128, 256, 4, 8, 688, 16),
// tiny — CS336's TinyStories model (10000, 256, 512, 4, 16, 1344, 8).
const std::vector<ModelPreset>& model_presets();
// The preset by name; throws tapegrad::Error listing the names when there is none.
const ModelPreset& model_preset(const std::string& name);
// Its TransformerLMConfig (MHA, untied, RoPE θ 10000); vocab_size > 0 replaces the preset's.
nn::TransformerLMConfig preset_config(const std::string& name, int64_t vocab_size = 0);

// Training FLOPs per token (PaLM-style, as bench/train_lm.cpp and torch_lm.py count them):
//   F = 6·N_mm + 12·L·T·C,  N_mm = L·(2C² + 2·C·Hkv·D + 3·C·F_ff) + C·V
// (every matmul weight incl. the LM head, tied or not; the attention term counts the full T×T).
// `config` must be resolved (d_ff, n_kv_heads set), as TransformerLM::config is.
double flops_per_token(const nn::TransformerLMConfig& config);

}  // namespace tapegrad::lm
