// quantized_model.cpp — writing and reading int8 model files (layout in quantized_model.h).
#include "lm/quantized_model.h"

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "autograd/io/checksum.h"
#include "autograd/io/exact_number.h"
#include "lm/model_budget.h"
#include "autograd/io/safetensors.h"
#include "kernels/error.h"
#include "lm/model_io.h"

namespace tapegrad::lm {

namespace {

constexpr const char* kScheme = "q8_0";
constexpr const char* kValuesSuffix = ".weight.int8";
constexpr const char* kScalesSuffix = ".weight.scales";

// One stored tensor as the checksum sees it: name, file dtype, shape, bytes.
struct Blob {
  std::string dtype;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  uint64_t nbytes = 0;
};

std::string checksum(const std::map<std::string, std::string>& meta, const std::map<std::string, Blob>& blobs) {
  io::Checksum c;
  for (const auto& [k, v] : meta) {
    if (k == "checksum") continue;
    c.text(k);
    c.text(v);
  }
  for (const auto& [name, b] : blobs) {
    c.text(name);
    c.text(b.dtype);
    c.word(b.shape.size());
    for (int64_t d : b.shape) c.word(uint64_t(d));
    c.bytes(b.data, b.nbytes);
  }
  return c.hex();
}

std::string str_field(const std::string& path, const std::map<std::string, std::string>& meta, const std::string& key) {
  const auto it = meta.find(key);
  TG_CHECK(it != meta.end(), "int8 model '{}': the metadata has no '{}'", path, key);
  return it->second;
}

template <class T>
T num_field(const std::string& path, const std::map<std::string, std::string>& meta, const std::string& key) {
  const std::string s = str_field(path, meta, key);
  return parse_number<T>(s, fmt::format("int8 model '{}': metadata '{}'", path, key));
}

bool ends_with(const std::string& s, const char* suffix) { return s.ends_with(suffix); }

}  // namespace

void save_int8_model(const nn::TransformerLM& model, const std::string& path, int64_t step,
                     const optim::ConfigMap& extra) {
  const auto weights = model.named_int8_weights();
  TG_CHECK(!weights.empty(), "save_int8_model: '{}': the model has no int8 weights (quantize it first)", path);
  const int64_t group = weights.begin()->second->group;
  std::map<std::string, std::string> meta;
  meta["format"] = kInt8ModelFormat;
  meta["format_version"] = fmt::format("{}", kInt8ModelFormatVersion);
  meta["scheme"] = kScheme;
  meta["group_size"] = fmt::format("{}", group);
  meta["step"] = fmt::format("{}", step);
  for (const auto& [k, v] : model.config.to_config_map()) meta["config." + k] = v;
  for (const auto& [k, v] : extra) meta["extra." + k] = v;

  std::map<std::string, Tensor> tensors;
  std::map<std::string, SafetensorsBytes> raw;
  std::map<std::string, Blob> blobs;
  for (const auto& [name, t] : model.state_dict()) {
    const Tensor c = t.detach().to(kCPU).to(kFloat32).contiguous();
    tensors["model." + name] = c;
    blobs["model." + name] = {"F32", c.shape().vec(), c.data_ptr(), uint64_t(c.numel()) * 4};
  }
  for (const auto& [prefix, w] : weights) {
    TG_CHECK(w->group == group, "save_int8_model: '{}': {} has groups of {}, the others {} (one group size per file)",
             path, prefix, w->group, group);
    const Blob values{"I8", {w->rows, w->cols}, w->q.data(), uint64_t(w->q.size())};
    const Blob scales{"F32", {w->rows, w->groups_per_row()}, w->scales.data(), uint64_t(w->scales.size()) * 4};
    for (const auto& [suffix, b] : {std::pair{kValuesSuffix, values}, std::pair{kScalesSuffix, scales}}) {
      const std::string name = "model." + prefix + suffix;
      blobs[name] = b;
      raw[name] = {b.dtype, b.shape, b.data, b.nbytes};
    }
  }
  meta["checksum"] = checksum(meta, blobs);
  try {
    save_safetensors(path, tensors, meta, raw);  // atomic
  } catch (const Error& e) {
    throw Error(fmt::format("save_int8_model: {}", e.what()));
  }
}

bool is_int8_model_file(const std::string& path) {
  try {
    const SafetensorsFile f(path);
    const auto it = f.metadata().find("format");
    return it != f.metadata().end() && it->second == kInt8ModelFormat;
  } catch (const Error&) {
    return false;
  }
}

InferenceModel read_int8_model(const std::string& path) {
  std::unique_ptr<SafetensorsFile> file;
  try {
    file = std::make_unique<SafetensorsFile>(path);
  } catch (const Error& e) {
    throw Error(fmt::format("int8 model '{}' cannot be read: {}", path, e.what()));
  }
  const auto& meta = file->metadata();
  TG_CHECK(str_field(path, meta, "format") == kInt8ModelFormat, "'{}' is not an int8 model (metadata 'format' is not '{}')",
           path, kInt8ModelFormat);
  const auto version = num_field<int64_t>(path, meta, "format_version");
  TG_CHECK(version == kInt8ModelFormatVersion, "int8 model '{}': format version {} is not supported (this build reads {})",
           path, version, kInt8ModelFormatVersion);
  const std::string scheme = str_field(path, meta, "scheme");
  TG_CHECK(scheme == kScheme, "int8 model '{}': scheme '{}' is not supported (only {})", path, scheme, kScheme);
  const auto group = num_field<int64_t>(path, meta, "group_size");
  TG_CHECK(group >= 1 && group <= (int64_t(1) << 20), "int8 model '{}': group_size {} is out of range", path, group);
  const auto step = num_field<int64_t>(path, meta, "step");
  TG_CHECK(step >= 0, "int8 model '{}': step {} is negative", path, step);

  // Every tensor's bytes (checked against the header's dtype and size by read_bytes), then the checksum.
  // (Kept as int8_t: a values tensor's buffer is moved into its Int8Matrix below, not copied.)
  std::map<std::string, std::vector<int8_t>> bytes;
  std::map<std::string, Blob> blobs;
  for (const SafetensorsEntry& e : file->entries()) {
    TG_CHECK(e.dtype == "I8" || e.dtype == "F32", "int8 model '{}': tensor '{}' is {} (only I8 and F32 are written)",
             path, e.name, e.dtype);
    auto& b = bytes[e.name];
    b.resize(e.end - e.begin);
    file->read_bytes(e.name, e.dtype, b.data(), b.size());
    blobs[e.name] = {e.dtype, e.shape, b.data(), b.size()};
  }
  const std::string stored = str_field(path, meta, "checksum"), computed = checksum(meta, blobs);
  TG_CHECK(stored == computed, "int8 model '{}' is corrupt: its checksum is {} but its contents hash to {}", path,
           stored, computed);

  InferenceModel out;
  optim::Checkpoint& info = out.info;
  info.step = step;
  for (const auto& [k, v] : meta) {
    if (k.starts_with("config.")) info.config.emplace(k.substr(7), v);
    if (k.starts_with("extra.")) info.extra.emplace(k.substr(6), v);
  }
  nn::TransformerLMConfig config;
  try {
    config = nn::TransformerLMConfig::from_config_map(info.config);
  } catch (const Error& e) {
    throw Error(fmt::format("int8 model '{}' does not hold a TransformerLM config: {}", path, e.what()));
  }
  TG_CHECK(config.dtype == kFloat32, "int8 model '{}': config dtype {} (the float tensors are float32)", path,
           config.dtype);
  // Every weight of the config is in the file (int8 or float): a config that needs more than the file holds
  // is refused before a model of its size is allocated. (In double: a damaged config must not overflow.)
  {
    const double needed = config.n_heads > 0 ? config.parameter_count() : -1;
    double held = 0;
    for (const auto& [name, b] : blobs)
      if (!ends_with(name, kScalesSuffix)) held += double(b.nbytes) / (b.dtype == "I8" ? 1.0 : 4.0);
    TG_CHECK(needed == held, "int8 model '{}': its config needs {:.0f} weights but the file holds {:.0f}", path, needed,
             held);
    // The RoPE tables and KV cache grow with context_length × head size alone: bounded by the weights held.
    check_model_allocation(config, held, fmt::format("int8 model '{}'", path));
  }
  {
    nn::SkipParameterInitGuard no_init;  // every weight is set below: none is initialised or touched
    out.model = std::make_unique<nn::TransformerLM>(config);
  }
  nn::TransformerLM& model = *out.model;
  std::map<std::string, nn::Embedding*> embeddings{{"token_embeddings", model.token_embeddings.get()}};
  std::map<std::string, nn::Linear*> linears;
  for (const auto& [name, l] : model.named_linears()) linears[name] = l.get();

  nn::StateDict floats;
  int64_t n_int8 = 0;
  for (const auto& [name, b] : blobs) {
    TG_CHECK(name.starts_with("model."), "int8 model '{}': unexpected tensor '{}' (names start with 'model.')", path, name);
    const std::string local = name.substr(6);
    if (ends_with(local, kScalesSuffix)) {
      const std::string values = name.substr(0, name.size() - std::string(kScalesSuffix).size()) + kValuesSuffix;
      TG_CHECK(blobs.count(values), "int8 model '{}': '{}' has no values tensor '{}'", path, name, values);
      continue;  // read with its values
    }
    if (!ends_with(local, kValuesSuffix)) {  // a float tensor
      TG_CHECK(b.dtype == "F32", "int8 model '{}': tensor '{}' is {}, expected F32", path, name, b.dtype);
      Tensor t = empty(Shape(b.shape), kFloat32);
      std::memcpy(t.data_ptr(), b.data, b.nbytes);
      floats.emplace(local, t);
      continue;
    }
    const std::string prefix = local.substr(0, local.size() - std::string(kValuesSuffix).size());
    const std::string scales_name = "model." + prefix + kScalesSuffix;
    TG_CHECK(b.dtype == "I8" && b.shape.size() == 2, "int8 model '{}': '{}' must be I8 [rows, cols], is {} of {} dims",
             path, name, b.dtype, b.shape.size());
    const auto s = blobs.find(scales_name);
    TG_CHECK(s != blobs.end(), "int8 model '{}': '{}' has no scales tensor '{}'", path, name, scales_name);
    kernels::Int8Matrix m;
    m.rows = b.shape[0], m.cols = b.shape[1], m.group = group;
    TG_CHECK(m.rows > 0 && m.cols > 0, "int8 model '{}': '{}' is empty", path, name);
    const std::vector<int64_t> scales_shape{m.rows, m.groups_per_row()};
    TG_CHECK(s->second.dtype == "F32" && s->second.shape == scales_shape,
             "int8 model '{}': '{}' must be F32 [{}, {}] for values [{}, {}] in groups of {}", path, scales_name, m.rows,
             m.groups_per_row(), m.rows, m.cols, group);
    m.q = std::move(bytes.at(name));  // the buffer b.data points into: moved, not copied
    m.scales.resize(s->second.nbytes / 4);
    std::memcpy(m.scales.data(), s->second.data, s->second.nbytes);
    for (size_t i = 0; i < m.q.size(); ++i)
      TG_CHECK(m.q[i] != -128, "int8 model '{}': '{}' value {} (row {}, column {}) is −128: Q8_0 values are in [−127, 127]",
               path, name, i, int64_t(i) / m.cols, int64_t(i) % m.cols);
    for (size_t i = 0; i < m.scales.size(); ++i)
      TG_CHECK(std::isfinite(m.scales[i]) && m.scales[i] >= 0,
               "int8 model '{}': '{}' scale {} (row {}, group {}) is {}: scales are finite and ≥ 0", path, scales_name,
               i, int64_t(i) / m.groups_per_row(), int64_t(i) % m.groups_per_row(), m.scales[i]);
    try {
      if (const auto l = linears.find(prefix); l != linears.end()) {
        TG_CHECK(!l->second->int8_weight, "two int8 weights for {}", prefix);
        l->second->set_int8_weight(std::move(m));
      } else if (const auto e = embeddings.find(prefix); e != embeddings.end()) {
        e->second->set_int8_weight(std::move(m));
      } else {
        throw Error(fmt::format("the model has no Linear or Embedding named {}", prefix));
      }
    } catch (const Error& e) {
      throw Error(fmt::format("int8 model '{}': tensor '{}': {}", path, name, e.what()));
    }
    ++n_int8;
  }
  TG_CHECK(n_int8 > 0, "int8 model '{}' holds no int8 tensor", path);
  try {
    model.load_state_dict(floats);  // strict: exactly the weights that stayed float
  } catch (const Error& e) {
    throw Error(fmt::format("int8 model '{}': {}", path, e.what()));
  }
  model.eval();
  info.model_dtype = fmt::format("int8 {} groups of {}", kScheme, group);
  out.int8_group = group;
  return out;
}

InferenceModel load_inference_model(const std::string& path) {
  if (is_int8_model_file(path)) return read_int8_model(path);
  InferenceModel out;
  out.info = optim::read_checkpoint(path);
  out.model = model_from_checkpoint(out.info, path);
  out.info.model_state.clear();  // the model holds the weights now
  out.info.optimizer_state.clear();
  return out;
}

WeightCount count_weights(const nn::TransformerLM& model) {
  WeightCount c;
  for (const auto& [name, t] : model.state_dict()) {
    c.values += t.numel();
    c.bytes += t.numel() * int64_t(dtype_size(t.dtype()));
  }
  for (const auto& [prefix, w] : model.named_int8_weights()) {
    c.values += w->rows * w->cols;
    c.int8_values += w->rows * w->cols;
    c.bytes += w->bytes();
  }
  return c;
}

}  // namespace tapegrad::lm
