// fuzz_llama2c_model.cpp — libFuzzer target: the input is a llama2.c model file (lm/llama2c.h, export.py's
// version 0, 1 or 2). Asserts: read_llama2c_model throws only tapegrad::Error (every size is checked before
// anything is allocated, so no header can ask for more memory than the file holds); a model it reads has
// a consistent config (n_heads divides d_model, n_kv_heads divides n_heads, an even head size); its float32
// weights and (version 2) its int8 matrices — groups that divide every row, values in [−127, 127], finite
// scales ≥ 0 — account for every byte of the file; its config keeps the allocation bound (model_bound.h:
// RoPE tables and KV cache grow with seq_len × head size alone), and the model made from it
// (make_llama2c_model) is built and measured.
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "fuzz_common.h"
#include "kernels/error.h"
#include "lm/llama2c.h"
#include "model_bound.h"

using namespace tapegrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile input("llama2c_model");
  fuzz::limit_model_allocation();
  const std::string& path = input.set(fuzz::as_view(data, size));
  lm::Llama2cModel m;
  try {
    m = lm::read_llama2c_model(path);
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
    return 0;
  }
  const nn::TransformerLMConfig& c = m.config;
  FUZZ_ASSERT(m.version >= 0 && m.version <= 2, "unknown version");
  FUZZ_ASSERT(c.d_model > 0 && c.n_heads > 0 && c.d_model % c.n_heads == 0, "n_heads does not divide d_model");
  FUZZ_ASSERT(c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0, "n_kv_heads does not divide n_heads");
  FUZZ_ASSERT((c.d_model / c.n_heads) % 2 == 0, "odd head size");
  FUZZ_ASSERT((m.version == 2) == (m.group_size > 0), "a group size without version 2 or the reverse");
  FUZZ_ASSERT(m.version == 2 || m.int8_weights.empty(), "int8 weights in a float32 file");
  int64_t bytes = 0;
  for (const auto& [name, t] : m.weights) {
    FUZZ_ASSERT(t.defined() && t.dtype() == kFloat32, "weight '" + name + "' is not float32");
    FUZZ_ASSERT(m.version < 2 || t.dim() == 1, "version 2 holds float matrix '" + name + "'");
    bytes += 4 * t.numel();
  }
  int64_t embedding = 4 * c.vocab_size * c.d_model;  // what one stored copy of the tied classifier takes
  for (const auto& [name, w] : m.int8_weights) {
    FUZZ_ASSERT(w.group == m.group_size && w.cols % w.group == 0, "'" + name + "' has groups straddling its rows");
    FUZZ_ASSERT(int64_t(w.q.size()) == w.rows * w.cols && int64_t(w.scales.size()) == w.rows * (w.cols / w.group),
                "'" + name + "' holds the wrong number of values or scales");
    for (int8_t q : w.q) FUZZ_ASSERT(q != -128, "'" + name + "' holds -128");
    for (float s : w.scales) FUZZ_ASSERT(std::isfinite(s) && s >= 0, "'" + name + "' holds a bad scale");
    bytes += int64_t(w.q.size()) + 4 * int64_t(w.scales.size());
    if (name == "token_embeddings.weight") embedding = int64_t(w.q.size()) + 4 * int64_t(w.scales.size());
  }
  if (m.version == 0) {
    FUZZ_ASSERT(m.freq_cis_real.defined() && m.freq_cis_imag.defined(), "v0 without freq_cis tables");
    bytes += 4 * (m.freq_cis_real.numel() + m.freq_cis_imag.numel());
  }
  // A tied classifier is one tensor in the file but may be listed once: count what the file holds.
  const int64_t header = m.version == 0 ? 28 : 256;
  FUZZ_ASSERT(header + bytes == int64_t(size) || (c.tie_embeddings && header + bytes - embedding == int64_t(size)),
              "the weights do not account for the file's " + std::to_string(size) + " bytes");
  fuzz::check_config_bound(c, size, "read_llama2c_model");
  std::unique_ptr<nn::TransformerLM> model;
  try {
    model = lm::make_llama2c_model(std::move(m));
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
    return 0;
  }
  fuzz::check_model_bound(*model, size, "make_llama2c_model");
  return 0;
}
