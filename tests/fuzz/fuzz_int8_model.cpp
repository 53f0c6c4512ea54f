// fuzz_int8_model.cpp — libFuzzer target: the input is an int8 model file (lm/quantized_model.h: safetensors
// with I8 values, F32 scales and norms, "tapegrad-int8" metadata under a checksum). Asserts: read_int8_model
// throws only tapegrad::Error; a model it reads is int8 with one group size, values in [−127, 127], finite
// scales ≥ 0, and is_int8_model_file says so; written again with save_int8_model and re-read it gives the same
// config, step, int8 values, scales and float tensors, bit for bit; a small one runs a forward pass.
// A random change rarely keeps the checksum valid, so every input that is safetensors with the int8 format
// and a small config is also read a second time with its checksum recomputed (as quantized_model.cpp
// computes it), which lets mutations reach the checks behind the checksum — the allocation bound too
// (model_bound.h: any context_length, any config; the library's slack lowered so that accepted models stay small).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/io/checksum.h"
#include "autograd/io/safetensors.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "fuzz_common.h"
#include "kernels/error.h"
#include "lm/quantized_model.h"
#include "model_bound.h"

using namespace tapegrad;

namespace {

// Models this small are built and run; larger configs are only seen as written (a writer made them).
bool small_config(const nn::TransformerLMConfig& c) {
  return c.vocab_size <= 4096 && c.context_length <= 4096 && c.d_model <= 256 && c.n_layers <= 8 &&
         c.n_heads <= 64 && c.d_ff <= 1024;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), size_t(ca.numel()) * dtype_size(ca.dtype())) == 0;
}

void check_model(const std::string& path, size_t input_bytes, const fuzz::ScratchDir& scratch) {
  lm::InferenceModel m;
  try {
    m = lm::read_int8_model(path);
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
    return;
  }
  fuzz::check_config_bound(m.model->config, input_bytes, "read_int8_model");
  fuzz::check_model_bound(*m.model, input_bytes, "read_int8_model");
  FUZZ_ASSERT(m.model && m.model->is_int8(), "read_int8_model returned no int8 model");
  FUZZ_ASSERT(m.int8_group >= 1, "group size " + std::to_string(m.int8_group));
  FUZZ_ASSERT(lm::is_int8_model_file(path), "is_int8_model_file is false for a file read_int8_model reads");
  const auto weights = m.model->named_int8_weights();
  for (const auto& [name, w] : weights) {
    FUZZ_ASSERT(w->group == m.int8_group, "'" + name + "' has another group size");
    kernels::check_int8_matrix(*w, "fuzz");  // throws (escapes: a crash) when the sizes disagree
    for (int8_t q : w->q) FUZZ_ASSERT(q != -128, "'" + name + "' holds -128");
    for (float s : w->scales) FUZZ_ASSERT(std::isfinite(s) && s >= 0, "'" + name + "' holds a bad scale");
  }

  // Written again and re-read: the same model, bit for bit.
  const std::string again = scratch.file("again.safetensors");
  lm::save_int8_model(*m.model, again, m.info.step, m.info.extra);
  const lm::InferenceModel r = lm::read_int8_model(again);
  FUZZ_ASSERT(r.info.step == m.info.step && r.info.extra == m.info.extra && r.int8_group == m.int8_group,
              "step, extra or group changed in a save/read round trip");
  FUZZ_ASSERT(r.model->config.to_config_map() == m.model->config.to_config_map(), "config changed in a round trip");
  const auto weights2 = r.model->named_int8_weights();
  FUZZ_ASSERT(weights2.size() == weights.size(), "int8 weights lost or gained in a round trip");
  for (const auto& [name, w] : weights) {
    const auto& w2 = weights2.at(name);
    FUZZ_ASSERT(w2->rows == w->rows && w2->cols == w->cols && w2->q == w->q &&
                    std::memcmp(w2->scales.data(), w->scales.data(), 4 * w->scales.size()) == 0,
                "'" + name + "' changed in a round trip");
  }
  const auto floats = m.model->state_dict(), floats2 = r.model->state_dict();
  FUZZ_ASSERT(floats.size() == floats2.size(), "float tensors lost or gained in a round trip");
  for (const auto& [name, t] : floats)
    FUZZ_ASSERT(floats2.count(name) && same_bytes(t, floats2.at(name)), "'" + name + "' changed in a round trip");
  scratch.remove("again.safetensors");

  if (!small_config(m.model->config)) return;
  NoGradGuard no_grad;
  const int64_t T = std::min<int64_t>(3, m.model->config.context_length);
  std::vector<int64_t> ids(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) ids[size_t(t)] = t % m.model->config.vocab_size;
  const Tensor logits = m.model->forward(from_vector<int64_t>(ids, {1, T}));
  const Shape want{1, T, m.model->config.vocab_size};
  FUZZ_ASSERT(logits.shape() == want, "logits of the wrong shape");
}

// The input with its checksum recomputed, written to the scratch directory; "" when it is not a
// safetensors file with the int8 format (any config: the reader bounds what it builds).
std::string reseal(const std::string& path, const fuzz::ScratchDir& scratch) {
  try {
    const SafetensorsFile f(path);
    std::map<std::string, std::string> meta = f.metadata();
    const auto format = meta.find("format");
    if (format == meta.end() || format->second != lm::kInt8ModelFormat) return "";
    io::Checksum c;
    for (const auto& [k, v] : meta) {
      if (k == "checksum") continue;
      c.text(k);
      c.text(v);
    }
    std::map<std::string, std::vector<unsigned char>> bytes;
    std::map<std::string, SafetensorsBytes> raw;
    for (const SafetensorsEntry& e : f.entries()) {  // sorted by name, as the checksum takes them
      auto& b = bytes[e.name];
      b.resize(e.end - e.begin);
      f.read_bytes(e.name, e.dtype, b.data(), b.size());
      c.text(e.name);
      c.text(e.dtype);
      c.word(e.shape.size());
      for (int64_t d : e.shape) c.word(uint64_t(d));
      c.bytes(b.data(), b.size());
      raw[e.name] = {e.dtype, e.shape, b.data(), b.size()};
    }
    meta["checksum"] = c.hex();
    const std::string out = scratch.file("resealed.safetensors");
    save_safetensors(out, {}, meta, raw);
    return out;
  } catch (const Error&) {
    return "";
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile input("int8_model");
  static const fuzz::ScratchDir scratch;
  fuzz::limit_model_allocation();
  const std::string& path = input.set(fuzz::as_view(data, size));
  check_model(path, size, scratch);
  const std::string resealed = reseal(path, scratch);
  if (!resealed.empty()) {
    check_model(resealed, size, scratch);
    scratch.remove("resealed.safetensors");
  }
  return 0;
}
