// fuzz_llama2c_model.cpp — libFuzzer target: the input is a llama2.c model file (lm/llama2c.h, export.py's
// version 0 or 1). Asserts: read_llama2c_model throws only tapegrad::Error (every size is checked before
// anything is allocated, so no header can ask for more memory than the file holds); a model it reads has
// a consistent config (n_heads divides d_model, n_kv_heads divides n_heads, an even head size) and
// float32 weights whose element counts add up to the floats in the file.
#include <string>

#include "fuzz_common.h"
#include "kernels/error.h"
#include "lm/llama2c.h"

using namespace tapegrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile input("llama2c_model");
  const std::string& path = input.set(fuzz::as_view(data, size));
  lm::Llama2cModel m;
  try {
    m = lm::read_llama2c_model(path);
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
    return 0;
  }
  const nn::TransformerLMConfig& c = m.config;
  FUZZ_ASSERT(m.version == 0 || m.version == 1, "unknown version");
  FUZZ_ASSERT(c.d_model > 0 && c.n_heads > 0 && c.d_model % c.n_heads == 0, "n_heads does not divide d_model");
  FUZZ_ASSERT(c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0, "n_kv_heads does not divide n_heads");
  FUZZ_ASSERT((c.d_model / c.n_heads) % 2 == 0, "odd head size");
  int64_t floats = 0;
  for (const auto& [name, t] : m.weights) {
    FUZZ_ASSERT(t.defined() && t.dtype() == kFloat32, "weight '" + name + "' is not float32");
    floats += t.numel();
  }
  if (m.version == 0) {
    FUZZ_ASSERT(m.freq_cis_real.defined() && m.freq_cis_imag.defined(), "v0 without freq_cis tables");
    floats += m.freq_cis_real.numel() + m.freq_cis_imag.numel();
  }
  // A tied classifier is one tensor in the file but may be listed once: count what the file holds.
  const int64_t header = m.version == 0 ? 28 : 256;
  FUZZ_ASSERT(header + 4 * floats == int64_t(size) ||
                  (c.tie_embeddings && header + 4 * (floats - c.vocab_size * c.d_model) == int64_t(size)),
              "the weights do not account for the file's " + std::to_string(size) + " bytes");
  return 0;
}
