// fuzz_hf_config.cpp — libFuzzer target: a Hugging Face Llama directory (lm/hf_llama.h, import_hf_llama).
// The input is split at its first NUL byte: config.json before it, model.safetensors after it (no NUL:
// no weights file, so only config.json is read before the import fails on the missing weights).
// Asserts: the import throws only tapegrad::Error; a model it imports has a consistent config and its
// weights load strictly into a TransformerLM of that config (every parameter present, with its shape and
// dtype, and nothing else), and the config keeps the allocation bound (model_bound.h: max_position_embeddings
// alone sizes the RoPE tables and the KV cache), so that model is always built.
#include <string>

#include "fuzz_common.h"
#include "kernels/error.h"
#include "lm/hf_llama.h"
#include "model_bound.h"
#include "nn/transformer_lm.h"

using namespace tapegrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::ScratchDir scratch;
  fuzz::limit_model_allocation();
  const fuzz::Split parts = fuzz::split_at(fuzz::as_view(data, size), '\0');
  scratch.write("config.json", parts.first);
  if (parts.found)
    scratch.write("model.safetensors", parts.second);
  else
    scratch.remove("model.safetensors");

  lm::HfLlama m;
  try {
    m = lm::import_hf_llama(scratch.path());
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
    return 0;
  }
  const nn::TransformerLMConfig& c = m.config;
  FUZZ_ASSERT(c.d_model > 0 && c.n_heads > 0 && c.d_model % c.n_heads == 0, "num_attention_heads does not divide hidden_size");
  FUZZ_ASSERT(c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0, "num_key_value_heads does not divide num_attention_heads");
  FUZZ_ASSERT((c.d_model / c.n_heads) % 2 == 0, "odd head size");
  FUZZ_ASSERT(c.dtype == kFloat32 || c.dtype == kFloat64, "dtype is not float32 or float64");
  for (const auto& [name, t] : m.weights) FUZZ_ASSERT(t.dtype() == c.dtype, "weight '" + name + "' has another dtype");
  fuzz::check_config_bound(c, size, "import_hf_llama");
  nn::TransformerLM model(c);
  try {
    model.load_state_dict(m.weights);
  } catch (const Error& e) {
    fuzz::property_failed("TransformerLM(config).load_state_dict(import_hf_llama(dir).weights)", __FILE__, __LINE__,
                          e.what());
  }
  fuzz::check_model_bound(model, size, "import_hf_llama");
  return 0;
}
