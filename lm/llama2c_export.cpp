// llama2c_export.cpp — writing llama2.c model files (llama2c_export.h): the model's weights gathered by
// llama2.c name (float or int8, as the model holds them), every check made, then the file streamed
// through a temp file in the order of lm/llama2c.h and renamed into place.
#include "lm/llama2c_export.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "autograd/io/atomic_file.h"
#include <fmt/ranges.h>

#include "kernels/error.h"
#include "kernels/int8.h"
#include "lm/llama2c_layout.h"

namespace tapegrad::lm {

static_assert(std::endian::native == std::endian::little, "llama2.c files are little-endian");

namespace {

constexpr uint32_t kMagic = 0x616b3432;  // "ak42"
constexpr size_t kHeaderBytes = 256;     // versions 1 and 2

// One weight of the model: float (`f`, any dtype) or int8 (`q`).
struct Source {
  std::string name;  // our parameter name
  Tensor f;
  std::shared_ptr<const kernels::Int8Matrix> q;
  std::vector<int64_t> shape() const {
    if (q) return {q->rows, q->cols};
    return f.shape().vec();
  }
};

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}


template <class T>
void put(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}

// The float32 values of a weight (an int8 one dequantized).
std::vector<float> floats_of(const Source& s) {
  if (s.q) {
    std::vector<float> out(s.q->q.size());
    kernels::dequantize_int8(*s.q, out.data());
    return out;
  }
  const Tensor t = s.f.detach().to(kCPU).to(kFloat32).contiguous();
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

}  // namespace

int64_t llama2c_default_group(int64_t dim, int64_t hidden_dim) {
  int64_t g = 64;
  while (g > 1 && (dim % g != 0 || hidden_dim % g != 0)) g /= 2;
  return g;
}

Llama2cExport export_llama2c(const nn::TransformerLM& model, const std::string& path,
                             const Llama2cExportOptions& options) {
  const nn::TransformerLMConfig& c = model.config;
  const int version = options.version;
  TG_CHECK(version >= 0 && version <= 2, "export llama2c: version {}: llama2.c files are version 0, 1 or 2", version);
  TG_CHECK(options.group >= 0, "export llama2c: group size {} must be positive", options.group);
  TG_CHECK(options.group == 0 || version == 2,
           "export llama2c: a group size ({}) applies to version 2 (int8) only; versions 0 and 1 are float32",
           options.group);
  TG_CHECK(c.rope_theta == 10000.0,
           "export llama2c: the model's rope_theta is {}, but llama2.c (run.c, runq.c) rotates with theta 10000", c.rope_theta);
  TG_CHECK(c.eps == 1e-5, "export llama2c: the model's RMSNorm eps is {}, but llama2.c (run.c, runq.c) uses 1e-5", c.eps);

  // Every weight of the model by our parameter name.
  std::map<std::string, Source> weights;
  for (const auto& [name, t] : model.state_dict()) weights[name] = {name, t, nullptr};
  for (const auto& [prefix, q] : model.named_int8_weights()) weights[prefix + ".weight"] = {prefix + ".weight", Tensor(), q};

  if (const auto modern = c.non_llama_options(); !modern.empty())
    throw Error(fmt::format("export llama2c: the model was trained with {}, which llama2.c's format cannot hold "
                            "(its model is the Llama architecture alone)", fmt::join(modern, ", ")));
  const int64_t C = c.d_model, L = c.n_layers, H = c.n_heads, KVH = c.n_kv_heads > 0 ? c.n_kv_heads : c.n_heads;
  const int64_t V = c.vocab_size, T = c.context_length;
  TG_CHECK(L >= 1 && H >= 1 && C % H == 0 && KVH >= 1 && H % KVH == 0 && (C / H) % 2 == 0,
           "export llama2c: d_model {}, {} layers, {} heads, {} kv heads: llama2.c needs n_heads dividing dim, "
           "n_kv_heads dividing n_heads and an even head size", C, L, H, KVH);
  const auto w1 = weights.find("layers.0.ffn.w1.weight");
  TG_CHECK(w1 != weights.end() && w1->second.shape().size() == 2, "export llama2c: the model has no layers.0.ffn.w1.weight");
  const int64_t F = w1->second.shape()[0], D = C / H;
  const bool shared = c.tie_embeddings;
  const int64_t fields[7] = {C, F, L, H, KVH, V, T};
  const char* const names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i)
    TG_CHECK(fields[i] >= 1 && fields[i] <= std::numeric_limits<int32_t>::max(),
             "export llama2c: {} = {} does not fit the header's int32", names[i], fields[i]);

  // The arrays of the file, in its order (lm/llama2c_layout.h).
  const std::vector<Llama2cArray> arrays = llama2c_layout(version, {C, F, L, H, KVH, V, T, shared});

  // Every weight llama2.c holds is in the model with its shape, and the model has no other.
  std::map<std::string, const Source*> used;
  for (const Llama2cArray& a : arrays) {
    if (a.name.empty()) continue;  // v0's RoPE tables: computed, not the model's
    for (int64_t l = 0; l < (a.per_layer ? L : 1); ++l) {
      const std::string name = llama2c_layer_name(a.name, l);
      const auto it = weights.find(name);
      TG_CHECK(it != weights.end(), "export llama2c: the model has no {} (llama2.c's {})", name, a.what);
      TG_CHECK(it->second.shape() == a.shape, "export llama2c: {} is {}, llama2.c's {} must be {}", name,
               shape_str(it->second.shape()), a.what, shape_str(a.shape));
      used[name] = &it->second;
    }
  }
  for (const auto& [name, s] : weights)
    TG_CHECK(used.count(name), "export llama2c: the model has {} {}, which llama2.c cannot store", name,
             shape_str(s.shape()));

  Llama2cExport result;
  result.version = version;
  int64_t group = 0;
  if (version == 2) {
    int64_t model_group = 0;
    for (const auto& [name, s] : weights) {
      if (!s.q) continue;
      TG_CHECK(model_group == 0 || s.q->group == model_group,
               "export llama2c: the model's int8 weights have groups of {} and of {} ({}): version 2 has one group size",
               model_group, s.q->group, name);
      model_group = s.q->group;
    }
    std::string advice;
    if (options.group > 0) {
      group = options.group;
      result.group_reason = "--group";
      TG_CHECK(model_group == 0 || group == model_group,
               "export llama2c: the model is int8 in groups of {}, so version 2 keeps its values and scales in groups "
               "of {}; --group {} would quantize twice: export the float checkpoint it came from with --group {}",
               model_group, model_group, group, group);
      advice = fmt::format("pass a --group that divides dim {} and hidden_dim {} (e.g. {})", C, F,
                           llama2c_default_group(C, F));
    } else if (model_group > 0) {
      group = model_group;
      result.group_reason = fmt::format("the model's own int8 groups of {}", model_group);
      advice = fmt::format("quantize the float checkpoint with a --group that divides dim {} and hidden_dim {} (e.g. "
                           "{}) and export that, or export version 0 or 1", C, F, llama2c_default_group(C, F));
    } else {
      group = llama2c_default_group(C, F);
      result.group_reason =
          group == 64 ? fmt::format("64, which divides dim {} and hidden_dim {}", C, F)
                      : fmt::format("the largest power of two <= 64 that divides dim {} and hidden_dim {}", C, F);
    }
    for (const Llama2cArray& a : arrays) {
      if (a.name.empty() || a.shape.size() != 2) continue;
      const int64_t cols = a.shape[1];
      TG_CHECK(cols % group == 0,
               "export llama2c: group size {} does not divide {} {}, the row length of {} {} (llama2.c's {}): runq.c "
               "groups the flattened matrix and quantizes activations in groups along dim and hidden_dim, so the "
               "group size must divide both; {}. Nothing written",
               group, a.row, cols, llama2c_layer_name(a.name, 0), shape_str(a.shape), a.what, advice);
    }
    result.group = group;
  }

  // The header.
  std::string header;
  if (version == 0) {
    for (int i = 0; i < 7; ++i) put(header, int32_t(i == 5 && !shared ? -fields[i] : fields[i]));
  } else {
    put(header, kMagic);
    put(header, int32_t(version));
    for (int64_t f : fields) put(header, int32_t(f));
    header.push_back(char(shared ? 1 : 0));
    if (version == 2) put(header, int32_t(group));
    header.resize(kHeaderBytes, '\0');
  }

  io::AtomicFile out(path, "export llama2c");
  out.write(header.data(), header.size());
  auto write_floats = [&](const std::vector<float>& f) { out.write(f.data(), 4 * f.size()); };
  auto write_q8 = [&](const Source& s) {
    std::shared_ptr<const kernels::Int8Matrix> q = s.q;
    if (q) {
      ++result.int8_kept;
    } else {
      const std::vector<float> f = floats_of(s);
      const auto shape = s.shape();
      q = std::make_shared<const kernels::Int8Matrix>(kernels::quantize_int8(f.data(), shape[0], shape[1], group));
      ++result.int8_quantized;
    }
    out.write(q->q.data(), q->q.size());
    out.write(q->scales.data(), 4 * q->scales.size());
  };
  for (const Llama2cArray& a : arrays) {
    if (a.name.empty()) {
      // freq_cis_real / freq_cis_imag [seq_len, head_size/2] (v0): model.py's precompute_freqs_cis in float32.
      const bool real = a.what == "freq_cis_real";
      std::vector<float> table(size_t(T * D / 2));
      for (int64_t k = 0; k < D / 2; ++k) {
        const float freq = 1.0f / std::pow(10000.0f, float(2 * k) / float(D));
        for (int64_t pos = 0; pos < T; ++pos) {
          const float angle = float(pos) * freq;
          table[size_t(pos * (D / 2) + k)] = float(real ? std::cos(double(angle)) : std::sin(double(angle)));
        }
      }
      write_floats(table);
      continue;
    }
    for (int64_t l = 0; l < (a.per_layer ? L : 1); ++l) {
      const Source& s = *used.at(llama2c_layer_name(a.name, l));
      if (version == 2 && a.shape.size() == 2) {
        write_q8(s);
      } else {
        result.dequantized = result.dequantized || s.q != nullptr;
        write_floats(floats_of(s));
      }
    }
  }
  result.bytes = out.commit();
  return result;
}

}  // namespace tapegrad::lm
