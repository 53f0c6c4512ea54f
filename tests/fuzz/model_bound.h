// model_bound.h — the allocation bound of the model loaders (lm/model_budget.h, issue 35) as the fuzz
// targets of the model files check it (int8_model, checkpoint, llama2c_model, hf_config).
//
// limit_model_allocation() lowers the library's slack to kFuzzModelSlack for the whole process, so that
// every model a loader accepts is small enough to build on every input. Then, for an input of n bytes
// (each weight value takes at least 1 byte of it, and the model holds at most 8 bytes per value):
//   check_config_bound: the config a loader accepted asks (its RoPE tables and KV cache by this file's own
//   arithmetic, its weights by TransformerLMConfig::parameter_count) for at most
//     8·n + kFuzzModelSlack bytes of weights and as much of RoPE tables + the default KV cache;
//   check_model_bound: the model built holds at most 2·(8·n + kFuzzModelSlack) bytes of weights (int8 and
//     float) and RoPE tables, measured on its tensors.
// An input that asks for more is a finding (FUZZ_ASSERT aborts). A loader that forgot the check does not
// even get that far: building the model asks for the huge allocation, which libFuzzer's -malloc_limit_mb
// (and a replay, by std::bad_alloc escaping) reports as a crash.
#pragma once
#include <string>

#include "fuzz_common.h"
#include "lm/model_budget.h"
#include "lm/quantized_model.h"
#include "nn/transformer_lm.h"

namespace tapegrad::fuzz {

inline constexpr double kFuzzModelSlack = double(4 << 20);  // 4 MiB

inline void limit_model_allocation() {
  static const bool done = (lm::set_model_allocation_slack(kFuzzModelSlack), true);
  (void)done;
}

inline double bound_bytes(size_t input_bytes) { return 8.0 * double(input_bytes) + kFuzzModelSlack; }

inline void check_config_bound(const nn::TransformerLMConfig& c, size_t input_bytes, const char* loader) {
  // An accepted config is valid: its own weight count is safe to take.
  const double T = double(c.context_length), C = double(c.d_model), L = double(c.n_layers);
  const double Hkv = double(c.n_kv_heads > 0 ? c.n_kv_heads : c.n_heads), D = C / double(c.n_heads);
  const double s = double(dtype_size(c.dtype));
  const double weights = s * c.parameter_count();
  const double tables = 2 * T * (D / 2) * (8 + s) + L * 2 * Hkv * T * D * s;  // RoPE (float64 and dtype), KV cache
  FUZZ_ASSERT(weights <= bound_bytes(input_bytes),
              std::string(loader) + " accepted a config of " + std::to_string(weights) + " bytes of weights from " +
                  std::to_string(input_bytes) + " bytes");
  FUZZ_ASSERT(tables <= bound_bytes(input_bytes),
              std::string(loader) + " accepted context_length " + std::to_string(c.context_length) + ": " +
                  std::to_string(tables) + " bytes of RoPE tables and KV cache from " + std::to_string(input_bytes) +
                  " bytes");
}

inline void check_model_bound(const nn::TransformerLM& model, size_t input_bytes, const char* loader) {
  double bytes = double(lm::count_weights(model).bytes);
  for (const Tensor* t : {&model.rope->cos_table, &model.rope->sin_table, &model.rope->position_ids})
    bytes += double(t->numel()) * double(dtype_size(t->dtype()));
  FUZZ_ASSERT(bytes <= 2 * bound_bytes(input_bytes),
              std::string(loader) + " built a model of " + std::to_string(bytes) + " bytes from " +
                  std::to_string(input_bytes) + " bytes");
}

}  // namespace tapegrad::fuzz
