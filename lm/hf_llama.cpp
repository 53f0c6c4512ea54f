// hf_llama.cpp — Hugging Face Llama config.json + model.safetensors (or its shards), both ways (see
// hf_llama.h).
#include "lm/hf_llama.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "autograd/io/safetensors.h"
#include "data/file_io.h"
#include "data/json_file.h"
#include "kernels/dtype.h"
#include "kernels/error.h"
#include "lm/model_budget.h"

namespace tapegrad::lm {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct NamePair {
  std::string ours, hf;
  std::vector<int64_t> shape;
  bool rope_rows = false;  // q_proj / k_proj: rows permuted per head
};

std::vector<NamePair> name_table(int64_t L, int64_t V, int64_t C, int64_t H, int64_t Hkv, int64_t D, int64_t F,
                                 bool tied) {
  std::vector<NamePair> t;
  t.push_back({"token_embeddings.weight", "model.embed_tokens.weight", {V, C}});
  for (int64_t i = 0; i < L; ++i) {
    const std::string o = fmt::format("layers.{}.", i), h = fmt::format("model.layers.{}.", i);
    t.push_back({o + "ln1.weight", h + "input_layernorm.weight", {C}});
    t.push_back({o + "attn.q_proj.weight", h + "self_attn.q_proj.weight", {H * D, C}, true});
    t.push_back({o + "attn.k_proj.weight", h + "self_attn.k_proj.weight", {Hkv * D, C}, true});
    t.push_back({o + "attn.v_proj.weight", h + "self_attn.v_proj.weight", {Hkv * D, C}});
    t.push_back({o + "attn.output_proj.weight", h + "self_attn.o_proj.weight", {C, H * D}});
    t.push_back({o + "ln2.weight", h + "post_attention_layernorm.weight", {C}});
    t.push_back({o + "ffn.w1.weight", h + "mlp.gate_proj.weight", {F, C}});
    t.push_back({o + "ffn.w3.weight", h + "mlp.up_proj.weight", {F, C}});
    t.push_back({o + "ffn.w2.weight", h + "mlp.down_proj.weight", {C, F}});
  }
  t.push_back({"ln_final.weight", "model.norm.weight", {C}});
  if (!tied) t.push_back({"lm_head.weight", "lm_head.weight", {V, C}});
  return t;
}

// Rows of a [heads·D, C] matrix between our interleaved RoPE layout and HF's rotate-half layout
// (hf_llama.h): HF row h·D + k + j·D/2 ↔ our row h·D + 2k + j, j ∈ {0, 1}. A copy of whole rows: bit-exact.
Tensor permute_rope_rows(const Tensor& w, int64_t D, bool to_hf) {
  const Tensor src = w.to(kCPU).contiguous();
  TG_CHECK(src.shape().size() == 2 && src.shape()[0] % D == 0 && D % 2 == 0, "permute_rope_rows: bad shape");
  Tensor dst = empty(src.shape(), src.dtype());
  const int64_t heads = src.shape()[0] / D;
  const size_t row = size_t(src.shape()[1]) * dtype_size(src.dtype());
  const char* s = static_cast<const char*>(src.data_ptr());
  char* d = static_cast<char*>(dst.data_ptr());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t k = 0; k < D / 2; ++k)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t ours = h * D + 2 * k + j, hf = h * D + k + j * (D / 2);
        if (to_hf) std::memcpy(d + size_t(hf) * row, s + size_t(ours) * row, row);
        else std::memcpy(d + size_t(ours) * row, s + size_t(hf) * row, row);
      }
  return dst;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

void export_hf_llama(const nn::TransformerLM& model, const std::string& dir, std::optional<DType> weights) {
  const nn::TransformerLMConfig& c = model.config;
  const auto sd = model.state_dict();
  TG_CHECK(c.n_layers >= 1, "export hf: the model has no layers");
  if (const auto modern = c.non_llama_options(); !modern.empty())
    throw Error(fmt::format("export hf: the model was trained with {}, which a Hugging Face Llama model cannot hold",
                            fmt::join(modern, ", ")));
  auto rows = [&](const std::string& name) {
    const auto it = sd.find(name);
    TG_CHECK(it != sd.end(), "export hf: the model has no parameter '{}'", name);
    return it->second.shape()[0];
  };
  const int64_t H = c.n_heads, C = c.d_model, D = C / H;
  const int64_t Hkv = rows("layers.0.attn.k_proj.weight") / D, F = rows("layers.0.ffn.w1.weight");
  TG_CHECK(is_floating(c.dtype), "export hf: dtype must be float32, float64 or bfloat16");
  const DType file_dtype = weights.value_or(c.dtype);
  TG_CHECK(file_dtype == c.dtype || file_dtype == kBFloat16,
           "export hf: weights can be written as the model's {} or as bfloat16, not {}", c.dtype, file_dtype);

  std::map<std::string, Tensor> out;
  for (const NamePair& p : name_table(c.n_layers, c.vocab_size, C, H, Hkv, D, F, c.tie_embeddings)) {
    const auto it = sd.find(p.ours);
    TG_CHECK(it != sd.end(), "export hf: the model has no parameter '{}'", p.ours);
    const Tensor w = it->second.detach().to(kCPU).to(file_dtype);
    out[p.hf] = p.rope_rows ? permute_rope_rows(w, D, true) : w.contiguous();
  }
  const json config = {
      {"architectures", json::array({"LlamaForCausalLM"})},
      {"model_type", "llama"},
      {"hidden_size", C},
      {"intermediate_size", F},
      {"num_attention_heads", H},
      {"num_hidden_layers", c.n_layers},
      {"num_key_value_heads", Hkv},
      {"head_dim", D},
      {"vocab_size", c.vocab_size},
      {"max_position_embeddings", c.context_length},
      {"rms_norm_eps", c.eps},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", nullptr},
      {"tie_word_embeddings", c.tie_embeddings},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"mlp_bias", false},
      {"torch_dtype", dtype_name(file_dtype)},
  };
  std::error_code ec;
  fs::create_directories(dir, ec);
  TG_CHECK(!ec, "export hf: cannot create the directory '{}': {}", dir, ec.message());
  save_safetensors((fs::path(dir) / "model.safetensors").string(), out, {{"format", "pt"}});
  data::write_file_atomic((fs::path(dir) / "config.json").string(), config.dump(2) + "\n", "export hf");
}

namespace {

// config.json → our config (dtype is set later, from the tensors).
nn::TransformerLMConfig read_config(const std::string& cfg_path) {
  TG_CHECK(fs::exists(cfg_path), "import hf: '{}' does not exist", cfg_path);
  const json j = data::read_json_file(cfg_path, "import hf");
  TG_CHECK(j.is_object(), "import hf: '{}' is not a JSON object", cfg_path);
  auto bad = [&](const std::string& key, const std::string& what) {
    return Error(fmt::format("import hf: '{}': key '{}' {}", cfg_path, key, what));
  };
  auto present = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  auto get_int = [&](const char* key, std::optional<int64_t> dflt = {}) -> int64_t {
    if (!present(key)) {
      if (dflt) return *dflt;
      throw bad(key, "is missing");
    }
    const json& v = j[key];
    if (!v.is_number_integer()) throw bad(key, fmt::format("must be an integer (is {})", v.dump()));
    const int64_t n = v.get<int64_t>();
    if (n <= 0) throw bad(key, fmt::format("must be positive (is {})", n));
    return n;
  };
  auto get_double = [&](const json& obj, const char* key, std::optional<double> dflt = {}) -> double {
    if (!obj.contains(key) || obj[key].is_null()) {
      if (dflt) return *dflt;
      throw bad(key, "is missing");
    }
    const json& v = obj[key];
    if (!v.is_number()) throw bad(key, fmt::format("must be a number (is {})", v.dump()));
    const double x = v.get<double>();
    if (!(std::isfinite(x) && x > 0)) throw bad(key, fmt::format("must be positive (is {})", v.dump()));
    return x;
  };
  auto get_bool = [&](const char* key, bool dflt) -> bool {
    if (!present(key)) return dflt;
    if (!j[key].is_boolean()) throw bad(key, fmt::format("must be true or false (is {})", j[key].dump()));
    return j[key].get<bool>();
  };
  auto get_string = [&](const char* key, std::optional<std::string> dflt = {}) -> std::string {
    if (!present(key)) {
      if (dflt) return *dflt;
      throw bad(key, "is missing");
    }
    if (!j[key].is_string()) throw bad(key, fmt::format("must be a string (is {})", j[key].dump()));
    return j[key].get<std::string>();
  };

  if (const std::string t = get_string("model_type"); t != "llama") throw bad("model_type", fmt::format("is \"{}\": only \"llama\" is supported", t));
  if (const std::string a = get_string("hidden_act", "silu"); a != "silu") throw bad("hidden_act", fmt::format("is \"{}\": only \"silu\" is supported", a));
  if (get_bool("attention_bias", false)) throw bad("attention_bias", "is true: biases are not supported");
  if (get_bool("mlp_bias", false)) throw bad("mlp_bias", "is true: biases are not supported");
  if (present("rope_scaling")) throw bad("rope_scaling", fmt::format("is {}: RoPE scaling is not supported", j["rope_scaling"].dump()));

  nn::TransformerLMConfig c;
  c.d_model = get_int("hidden_size");
  c.d_ff = get_int("intermediate_size");
  c.n_heads = get_int("num_attention_heads");
  c.n_layers = get_int("num_hidden_layers");
  c.n_kv_heads = get_int("num_key_value_heads", c.n_heads);
  c.vocab_size = get_int("vocab_size");
  c.context_length = get_int("max_position_embeddings");
  c.eps = get_double(j, "rms_norm_eps");
  c.rope_theta = get_double(j, "rope_theta", 10000.0);
  if (present("rope_parameters")) {  // transformers ≥ 5 writes rope_theta here
    const json& rp = j["rope_parameters"];
    if (!rp.is_object()) throw bad("rope_parameters", "must be an object");
    std::string type = "default";  // "rope_type", else the older "type"
    for (const char* key : {"type", "rope_type"})
      if (rp.contains(key)) {
        if (!rp[key].is_string()) throw bad("rope_parameters", fmt::format("has a {} that is not a string ({})", key, rp[key].dump()));
        type = rp[key].get<std::string>();
      }
    if (type != "default") throw bad("rope_parameters", fmt::format("has rope_type \"{}\": only \"default\" is supported", type));
    const double theta = get_double(rp, "rope_theta", c.rope_theta);
    if (present("rope_theta") && theta != c.rope_theta) throw bad("rope_parameters", "has a rope_theta that differs from rope_theta");
    c.rope_theta = theta;
  }
  c.tie_embeddings = get_bool("tie_word_embeddings", false);
  if (c.d_model % c.n_heads != 0) throw bad("num_attention_heads", fmt::format("({}) does not divide hidden_size ({})", c.n_heads, c.d_model));
  if (c.n_heads % c.n_kv_heads != 0) throw bad("num_key_value_heads", fmt::format("({}) does not divide num_attention_heads ({})", c.n_kv_heads, c.n_heads));
  const int64_t D = c.d_model / c.n_heads;
  if (D % 2 != 0) throw bad("num_attention_heads", fmt::format("gives an odd head size {} (RoPE rotates pairs)", D));
  if (present("head_dim") && get_int("head_dim") != D) throw bad("head_dim", fmt::format("({}) is not hidden_size / num_attention_heads ({})", j["head_dim"].dump(), D));
  return c;
}

// The safetensors files of a checkpoint and, for every tensor, the one that holds it.
struct WeightFiles {
  std::string described;                // what messages about the whole set name: the file or the index
  std::vector<SafetensorsFile> files;   // each file once
  std::map<std::string, size_t> where;  // tensor name → files[i]

  const SafetensorsFile& file_of(const std::string& name) const { return files[where.at(name)]; }
  const SafetensorsEntry& entry(const std::string& name) const { return file_of(name).entry(name); }
};

WeightFiles single_file(const std::string& path) {
  WeightFiles w;
  w.described = path;
  w.files.emplace_back(path);
  for (const SafetensorsEntry& e : w.files[0].entries()) w.where[e.name] = 0;
  return w;
}

// A shard's name from the weight_map: a plain file name in the checkpoint directory.
void check_shard_name(const std::string& index, const std::string& tensor, const std::string& shard) {
  const bool plain = !shard.empty() && shard.find_first_of(std::string("/\\\0", 3)) == std::string::npos &&
                     shard.find("..") == std::string::npos && shard != ".";
  TG_CHECK(plain, "import hf: '{}': weight_map puts '{}' in \"{}\": a shard must be a file name in the same directory "
           "(no path separator, no \"..\")", index, tensor, shard);
}

// model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard file name}}. Every shard
// named is opened once; each tensor must be in exactly the shard the map names, and every tensor of
// those shards must be in the map. The metadata (e.g. total_size) is not used.
WeightFiles sharded_files(const std::string& dir, const std::string& index) {
  const json j = data::read_json_file(index, "import hf");
  TG_CHECK(j.is_object(), "import hf: '{}' is not a JSON object", index);
  TG_CHECK(j.contains("weight_map") && j["weight_map"].is_object(),
           "import hf: '{}': key 'weight_map' is missing or not an object", index);
  TG_CHECK(!j.contains("metadata") || j["metadata"].is_object() || j["metadata"].is_null(),
           "import hf: '{}': key 'metadata' must be an object", index);
  WeightFiles w;
  w.described = index;
  std::map<std::string, size_t> shard_ids;  // shard file name → files[i]
  for (const auto& [tensor, value] : j["weight_map"].items()) {
    TG_CHECK(value.is_string(), "import hf: '{}': weight_map entry '{}' must be a file name (is {})", index, tensor,
             value.dump());
    const std::string shard = value.get<std::string>();
    check_shard_name(index, tensor, shard);
    auto it = shard_ids.find(shard);
    if (it == shard_ids.end()) {
      const std::string path = (fs::path(dir) / shard).string();
      TG_CHECK(fs::is_regular_file(path),
               "import hf: '{}': weight_map puts '{}' in shard '{}', which does not exist (or is not a file)", index,
               tensor, path);
      w.files.emplace_back(path);
      it = shard_ids.emplace(shard, w.files.size() - 1).first;
    }
    w.where[tensor] = it->second;
  }
  for (size_t i = 0; i < w.files.size(); ++i)
    for (const SafetensorsEntry& e : w.files[i].entries()) {
      const auto it = w.where.find(e.name);
      TG_CHECK(it != w.where.end(),
               "import hf: '{}': shard '{}' holds tensor '{}', which the weight_map does not name", index,
               w.files[i].path(), e.name);
      TG_CHECK(it->second == i, "import hf: '{}': tensor '{}' is in shard '{}' but the weight_map puts it in '{}'",
               index, e.name, w.files[i].path(), w.files[it->second].path());
    }
  for (const auto& [tensor, i] : w.where)
    TG_CHECK(w.files[i].contains(tensor),
             "import hf: '{}': weight_map puts '{}' in shard '{}', which has no such tensor", index, tensor,
             w.files[i].path());
  return w;
}

// As transformers' from_pretrained: model.safetensors when it exists, else the sharded index.
WeightFiles open_weights(const std::string& dir, std::string& source) {
  const std::string single = (fs::path(dir) / "model.safetensors").string();
  const std::string index = (fs::path(dir) / "model.safetensors.index.json").string();
  if (fs::exists(single)) {
    source = single;
    if (fs::exists(index))
      source += " (model.safetensors.index.json ignored: the single file wins, as in transformers)";
    return single_file(single);
  }
  TG_CHECK(fs::exists(index), "import hf: '{}' does not exist (nor does the sharded index '{}')", single, index);
  WeightFiles w = sharded_files(dir, index);
  source = fmt::format("{} ({} shard{})", index, w.files.size(), w.files.size() == 1 ? "" : "s");
  return w;
}

// Checks that every tensor is one of the model's (old rotary_emb.inv_freq buffers aside) with a float
// dtype, and gives the model's dtype: F32/F16/BF16 → float32, F64 → float64 (no mixing).
DType checked_weights_dtype(const WeightFiles& w, const std::map<std::string, const NamePair*>& by_hf) {
  bool any64 = false, any32 = false;
  for (const auto& [name, i] : w.where) {
    const std::string& path = w.files[i].path();
    if (!by_hf.count(name)) {
      if (name.ends_with("rotary_emb.inv_freq")) continue;  // a buffer of old checkpoints: recomputed
      throw Error(fmt::format("import hf: '{}': unexpected tensor '{}'{}", path, name,
                              name == "lm_head.weight" ? " (config.json says tie_word_embeddings: true)" : ""));
    }
    const std::string& dtype = w.entry(name).dtype;
    if (dtype == "F64") any64 = true;
    else if (dtype == "F32" || dtype == "F16" || dtype == "BF16") any32 = true;
    else
      throw Error(fmt::format("import hf: '{}': tensor '{}' has dtype {} (expected F32, F64, F16 or BF16)", path,
                              name, dtype));
  }
  TG_CHECK(!(any64 && any32), "import hf: '{}' mixes F64 tensors with F32/F16/BF16 ones", w.described);
  return any64 ? kFloat64 : kFloat32;
}

}  // namespace

HfLlama import_hf_llama(const std::string& dir) {
  TG_CHECK(fs::is_directory(dir), "import hf: '{}' is not a directory", dir);
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  nn::TransformerLMConfig c = read_config(cfg_path);
  const int64_t D = c.d_model / c.n_heads;
  HfLlama m;
  const WeightFiles w = open_weights(dir, m.weights_source);
  const auto table = name_table(c.n_layers, c.vocab_size, c.d_model, c.n_heads, c.n_kv_heads, D, c.d_ff, c.tie_embeddings);
  std::map<std::string, const NamePair*> by_hf;
  for (const NamePair& p : table) by_hf[p.hf] = &p;
  c.dtype = checked_weights_dtype(w, by_hf);
  // Before any tensor is read: the model of this config may take no more than the files' values justify
  // (max_position_embeddings alone sizes the RoPE tables and the KV cache).
  double values = 0;
  for (const SafetensorsFile& f : w.files)
    for (const SafetensorsEntry& e : f.entries()) {
      double n = 1;
      for (int64_t d : e.shape) n *= double(d);
      values += n;
    }
  check_model_allocation(c, values, fmt::format("import hf: '{}'", cfg_path), "max_position_embeddings");

  m.config = c;
  for (const SafetensorsFile& f : w.files) m.weight_files.push_back(f.path());
  for (const NamePair& p : table) {
    TG_CHECK(w.where.count(p.hf), "import hf: '{}' has no tensor '{}' (expected {})", w.described, p.hf, shape_str(p.shape));
    const SafetensorsFile& f = w.file_of(p.hf);
    const SafetensorsEntry& e = f.entry(p.hf);
    TG_CHECK(e.shape == p.shape, "import hf: '{}': tensor '{}' has shape {}, expected {} (from '{}')", f.path(), p.hf,
             shape_str(e.shape), shape_str(p.shape), cfg_path);
    // BF16 loads as bfloat16; the model keeps float32 master weights (the widening is exact).
    const Tensor t = f.load(p.hf).to(c.dtype);
    m.weights[p.ours] = p.rope_rows ? permute_rope_rows(t, D, false) : t;
  }
  return m;
}

}  // namespace tapegrad::lm
