// test_hf_llama.cpp — Hugging Face Llama export/import (lm/hf_llama.h):
//   * export → import of random TransformerLMs (MHA and GQA, tied and untied) gives the same weights
//     bit for bit and the same logits;
//   * the exported q_proj / k_proj rows are HF's rotate-half layout: attention scores computed here the
//     HF way (pairs (k, k + D/2)) on the exported weights equal ours (interleaved pairs, nn::RotaryEmbedding)
//     on our weights;
//   * BF16 files are widened exactly; old rotary_emb.inv_freq buffers are ignored;
//   * corrupt inputs (missing/extra tensor, wrong shape or dtype, bad config values, truncated file)
//     are refused with a message naming the file and the key or tensor;
//   * sharded checkpoints (model.safetensors.index.json + shards, split here from an export) import to the
//     same weights and logits as the single file; the single file wins when both are there; a missing
//     shard, a tensor missing from its shard, one absent from the map or in two shards, a shard name with
//     a path in it and a broken index are refused naming the index and the shard;
//   * `tapegrad export hf` / `import hf` through the built tool, tokenizer.json included.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <unistd.h>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/io/safetensors.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "data/hf_tokenizer_json.h"
#include "data/tokenizer_files.h"
#include "kernels/error.h"
#include "lm/hf_llama.h"
#include "nn/rope.h"
#include "optim/adamw.h"
#include "optim/checkpoint.h"
#include "tool_runner.h"

using namespace tapegrad;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("tapegrad_hf_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

nn::TransformerLMConfig small_config(int64_t n_kv_heads, bool tied) {
  nn::TransformerLMConfig c;
  c.vocab_size = 37;
  c.context_length = 16;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = n_kv_heads;
  c.d_ff = 48;
  c.rope_theta = 500.0;
  c.tie_embeddings = tied;
  c.eps = 1e-6;
  return c;
}

// Every parameter N(0, 0.3²) (norm weights 1 + N(0, 0.3²)): nothing left at its structured init.
void randomize(nn::TransformerLM& model, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 0.3f);
  nn::StateDict sd;
  for (const auto& [name, t] : model.state_dict()) {
    std::vector<float> v(size_t(t.numel()));
    const bool norm = name.find("ln") != std::string::npos;
    for (float& x : v) x = (norm ? 1.f : 0.f) + n(rng);
    sd[name] = from_vector<float>(v, t.shape());
  }
  model.load_state_dict(sd);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), size_t(ca.numel()) * dtype_size(ca.dtype())) == 0;
}

Tensor random_ids(int64_t B, int64_t T, int64_t V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> ids(size_t(B * T));
  for (auto& i : ids) i = int64_t(rng() % uint32_t(V));
  return from_vector<int64_t>(ids, {B, T});
}

std::vector<double> as_doubles(const Tensor& t) {
  const Tensor c = t.to(kFloat64).contiguous();
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

json read_json(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);
}

void write_json(const std::string& path, const json& j) {
  std::ofstream f(path, std::ios::trunc);
  f << j.dump(2);
}

// A safetensors file with every tensor stored as BF16 (float32 bits truncated to their upper half).
void save_bf16(const std::string& path, const std::map<std::string, Tensor>& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    const Tensor c = t.to(kFloat32).contiguous();
    const size_t begin = data.size();
    for (int64_t i = 0; i < c.numel(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, c.data<float>() + i, 4);
      const uint16_t half = uint16_t(bits >> 16);
      data.append(reinterpret_cast<const char*>(&half), 2);
    }
    header[name] = {{"dtype", "BF16"}, {"shape", std::vector<int64_t>(c.shape().begin(), c.shape().end())},
                    {"data_offsets", {begin, data.size()}}};
  }
  const std::string h = header.dump();
  const uint64_t n = h.size();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(h.data(), std::streamsize(h.size()));
  f.write(data.data(), std::streamsize(data.size()));
}

Tensor truncate_to_bf16(const Tensor& t) {
  Tensor c = t.to(kFloat32).contiguous().clone();
  for (int64_t i = 0; i < c.numel(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, c.data<float>() + i, 4);
    bits &= 0xFFFF0000u;
    std::memcpy(c.data<float>() + i, &bits, 4);
  }
  return c;
}

}  // namespace

TEST_CASE("hf llama: export → import round trip is bit-exact (MHA/GQA, tied/untied)", "[hf]") {
  for (const auto& [kv, tied] : std::vector<std::pair<int64_t, bool>>{{4, false}, {4, true}, {2, false}, {1, true}, {0, false}}) {
    INFO("n_kv_heads " << kv << " tied " << tied);
    nn::TransformerLM model(small_config(kv, tied));
    randomize(model, uint32_t(kv * 10 + tied));
    const std::string dir = temp_dir("roundtrip");
    lm::export_hf_llama(model, dir);
    REQUIRE(fs::exists(fs::path(dir) / "config.json"));
    const json cfg = read_json(dir + "/config.json");
    CHECK(cfg["architectures"] == json::array({"LlamaForCausalLM"}));
    CHECK(cfg["model_type"] == "llama");
    CHECK(cfg["num_key_value_heads"] == (kv > 0 ? kv : 4));
    CHECK(cfg["tie_word_embeddings"] == tied);
    CHECK(cfg["max_position_embeddings"] == 16);
    CHECK(cfg["torch_dtype"] == "float32");
    const auto hf = load_safetensors(dir + "/model.safetensors");
    CHECK(hf.count("lm_head.weight") == (tied ? 0u : 1u));
    CHECK(hf.size() == 1 + 2 * 9 + 1 + (tied ? 0 : 1));

    const lm::HfLlama m = lm::import_hf_llama(dir);
    CHECK(m.config.n_kv_heads == (kv > 0 ? kv : 4));
    CHECK(m.config.d_ff == 48);
    CHECK(m.config.tie_embeddings == tied);
    CHECK(m.config.rope_theta == 500.0);
    CHECK(m.config.eps == 1e-6);
    CHECK(m.config.dtype == kFloat32);
    const auto ours = model.state_dict();
    REQUIRE(m.weights.size() == ours.size());
    for (const auto& [name, t] : ours) {
      INFO(name);
      REQUIRE(m.weights.count(name));
      CHECK(same_bits(m.weights.at(name), t));
    }
    // The q/k rows were really permuted (an identity "permutation" would pass the round trip too).
    CHECK_FALSE(same_bits(hf.at("model.layers.0.self_attn.q_proj.weight"), ours.at("layers.0.attn.q_proj.weight")));
    CHECK(same_bits(hf.at("model.layers.0.self_attn.v_proj.weight"), ours.at("layers.0.attn.v_proj.weight")));

    nn::TransformerLM back(m.config);
    back.load_state_dict(m.weights);
    const Tensor ids = random_ids(2, 16, 37, 7);
    CHECK(same_bits(back(ids), model(ids)));
    fs::remove_all(dir);
  }
}

TEST_CASE("hf llama: exported q/k rows give the same attention scores with HF rotate-half RoPE", "[hf]") {
  for (const int64_t kv : {4, 2}) {
    INFO("n_kv_heads " << kv);
    const nn::TransformerLMConfig c = small_config(kv, false);
    nn::TransformerLM model(c);
    randomize(model, 99 + uint32_t(kv));
    const std::string dir = temp_dir("rotate_half");
    lm::export_hf_llama(model, dir);
    const auto hf = load_safetensors(dir + "/model.safetensors");
    const int64_t T = 12, C = c.d_model, H = c.n_heads, D = C / H, group = H / kv;

    std::mt19937 rng(5);
    std::normal_distribution<double> n(0, 1);
    std::vector<double> x(size_t(T * C));
    for (double& v : x) v = n(rng);

    // HF: q = x Wqᵀ, then per head out[k] = q[k]cos − q[k+D/2]sin, out[k+D/2] = q[k+D/2]cos + q[k]sin,
    // angle pos·θ^(−2k/D). Plain float64 loops on the exported weights.
    auto hf_rotated = [&](const Tensor& w_hf, int64_t heads) {
      const std::vector<double> w = as_doubles(w_hf);
      std::vector<double> q(size_t(T * heads * D));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t r = 0; r < heads * D; ++r) {
          double s = 0;
          for (int64_t i = 0; i < C; ++i) s += w[size_t(r * C + i)] * x[size_t(t * C + i)];
          q[size_t(t * heads * D + r)] = s;
        }
      std::vector<double> out(q.size());
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t k = 0; k < D / 2; ++k) {
            const double angle = double(t) * std::pow(c.rope_theta, -2.0 * double(k) / double(D));
            const size_t a = size_t(t * heads * D + h * D + k), b = a + size_t(D / 2);
            out[a] = q[a] * std::cos(angle) - q[b] * std::sin(angle);
            out[b] = q[b] * std::cos(angle) + q[a] * std::sin(angle);
          }
      return out;  // [T, heads·D]
    };
    // Ours: our weights, nn::RotaryEmbedding (interleaved pairs), float64 → [heads, T, D].
    const nn::RotaryEmbedding rope(c.rope_theta, D, c.context_length, kFloat64);
    const Tensor X = from_vector<double>(x, {T, C});
    auto ours_rotated = [&](const Tensor& w, int64_t heads) {
      const Tensor q = X.matmul(w.to(kFloat64).t()).reshape({T, heads, D}).transpose(0, 1).contiguous();
      return as_doubles(rope.forward(q));  // positions 0..T−1
    };
    const auto sd = model.state_dict();
    const std::vector<double> qh = hf_rotated(hf.at("model.layers.1.self_attn.q_proj.weight"), H);
    const std::vector<double> kh = hf_rotated(hf.at("model.layers.1.self_attn.k_proj.weight"), kv);
    const std::vector<double> qo = ours_rotated(sd.at("layers.1.attn.q_proj.weight"), H);
    const std::vector<double> ko = ours_rotated(sd.at("layers.1.attn.k_proj.weight"), kv);
    // The same HF formula on our (unpermuted) weights: must NOT match (the test has teeth).
    const std::vector<double> qn = hf_rotated(sd.at("layers.1.attn.q_proj.weight"), H);
    const std::vector<double> kn = hf_rotated(sd.at("layers.1.attn.k_proj.weight"), kv);
    double max_diff = 0, max_diff_unpermuted = 0, max_score = 0;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t u = 0; u < T; ++u) {
          const int64_t g = h / group;
          double s_hf = 0, s_ours = 0, s_wrong = 0;
          for (int64_t d = 0; d < D; ++d) {
            s_hf += qh[size_t(t * H * D + h * D + d)] * kh[size_t(u * kv * D + g * D + d)];
            s_ours += qo[size_t((h * T + t) * D + d)] * ko[size_t((g * T + u) * D + d)];
            s_wrong += qn[size_t(t * H * D + h * D + d)] * kn[size_t(u * kv * D + g * D + d)];
          }
          max_diff = std::max(max_diff, std::abs(s_hf - s_ours) / std::sqrt(double(D)));
          max_diff_unpermuted = std::max(max_diff_unpermuted, std::abs(s_wrong - s_ours) / std::sqrt(double(D)));
          max_score = std::max(max_score, std::abs(s_ours) / std::sqrt(double(D)));
        }
    INFO("max |score| " << max_score << ", diff " << max_diff << ", unpermuted diff " << max_diff_unpermuted);
    CHECK(max_score > 0.5);
    CHECK(max_diff <= 1e-5);
    CHECK(max_diff_unpermuted > 1e-2);
    fs::remove_all(dir);
  }
}

TEST_CASE("hf llama: BF16 tensors are widened exactly, rotary_emb.inv_freq is ignored", "[hf]") {
  nn::TransformerLM model(small_config(2, false));
  randomize(model, 3);
  const std::string dir = temp_dir("bf16");
  lm::export_hf_llama(model, dir);
  auto hf = load_safetensors(dir + "/model.safetensors");
  hf["model.layers.0.self_attn.rotary_emb.inv_freq"] = from_vector<float>(std::vector<float>(4, 1.f), {4});
  save_bf16(dir + "/model.safetensors", hf);
  const lm::HfLlama m = lm::import_hf_llama(dir);
  CHECK(m.config.dtype == kFloat32);
  for (const auto& [name, t] : model.state_dict()) {
    INFO(name);
    CHECK(same_bits(m.weights.at(name), truncate_to_bf16(t)));
  }
  fs::remove_all(dir);
}

TEST_CASE("hf llama: float64 models export and import as F64", "[hf]") {
  nn::TransformerLMConfig c = small_config(2, true);
  c.dtype = kFloat64;
  nn::TransformerLM model(c);
  const std::string dir = temp_dir("f64");
  lm::export_hf_llama(model, dir);
  CHECK(read_json(dir + "/config.json")["torch_dtype"] == "float64");
  const lm::HfLlama m = lm::import_hf_llama(dir);
  CHECK(m.config.dtype == kFloat64);
  for (const auto& [name, t] : model.state_dict()) CHECK(same_bits(m.weights.at(name), t));
  fs::remove_all(dir);
}

TEST_CASE("hf llama: corrupt directories are refused naming the file and the key", "[hf]") {
  nn::TransformerLM model(small_config(2, false));
  randomize(model, 11);
  const std::string good = temp_dir("good");
  lm::export_hf_llama(model, good);
  const std::string dir = temp_dir("corrupt");
  auto reset = [&] {
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy(good, dir, fs::copy_options::recursive);
  };
  const std::string cfg = dir + "/config.json", st = dir + "/model.safetensors";
  using Catch::Contains;

  SECTION("tensors") {
    reset();
    auto hf = load_safetensors(st);
    hf.erase("model.layers.1.mlp.up_proj.weight");
    save_safetensors(st, hf);
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(st) && Contains("no tensor 'model.layers.1.mlp.up_proj.weight'"));

    reset();
    hf = load_safetensors(st);
    hf["model.layers.0.self_attn.k_proj.weight"] = zeros({18, 32});
    save_safetensors(st, hf);
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(st) && Contains("'model.layers.0.self_attn.k_proj.weight' has shape [18, 32], expected [16, 32]"));

    reset();
    hf = load_safetensors(st);
    hf["model.layers.0.self_attn.q_proj.bias"] = zeros({32});
    save_safetensors(st, hf);
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(st) && Contains("unexpected tensor 'model.layers.0.self_attn.q_proj.bias'"));

    reset();
    hf = load_safetensors(st);
    hf["model.norm.weight"] = zeros({32}, kInt64);
    save_safetensors(st, hf);
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(st) && Contains("'model.norm.weight' has dtype I64"));

    reset();
    hf = load_safetensors(st);
    hf["model.norm.weight"] = zeros({32}, kFloat64);
    save_safetensors(st, hf);
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(st) && Contains("mixes F64"));

    reset();
    fs::resize_file(st, fs::file_size(st) / 2);
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(st));

    reset();
    fs::remove(st);
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(st) && Contains("does not exist"));
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains("model.safetensors.index.json") && Contains("does not exist"));
    write_json(dir + "/model.safetensors.index.json", {{"weight_map", json::object()}});  // sharded, no shards
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains("model.safetensors.index.json") && Contains("has no tensor"));

    reset();
    json j = read_json(cfg);
    j["tie_word_embeddings"] = true;
    write_json(cfg, j);
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(st) && Contains("unexpected tensor 'lm_head.weight'"));
  }

  SECTION("config values") {
    const std::vector<std::tuple<std::string, json, std::string>> cases = {
        {"model_type", "mistral", "only \"llama\""},
        {"hidden_act", "gelu", "only \"silu\""},
        {"attention_bias", true, "biases are not supported"},
        {"mlp_bias", true, "biases are not supported"},
        {"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}, "RoPE scaling is not supported"},
        {"num_attention_heads", 3, "does not divide hidden_size"},
        {"num_key_value_heads", 3, "does not divide num_attention_heads"},
        {"num_key_value_heads", "two", "must be an integer"},
        {"hidden_size", -32, "must be positive"},
        {"hidden_size", nullptr, "is missing"},
        {"rms_norm_eps", "1e-6", "must be a number"},
        {"head_dim", 16, "is not hidden_size / num_attention_heads"},
        {"intermediate_size", 50, "has shape"},  // config and tensors disagree: the tensor is named
        {"tie_word_embeddings", "yes", "must be true or false"},
        {"rope_parameters", {{"rope_type", "llama3"}, {"rope_theta", 500.0}}, "only \"default\""},
    };
    for (const auto& [key, value, what] : cases) {
      INFO(key << " = " << value.dump());
      reset();
      json j = read_json(cfg);
      if (value.is_null()) j.erase(key);
      else j[key] = value;
      write_json(cfg, j);
      CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(key == "intermediate_size" ? st : cfg) &&
                                                      Contains(key == "intermediate_size" ? "mlp.gate_proj.weight" : "'" + key + "'") &&
                                                      Contains(what));
    }
    reset();
    { std::ofstream(cfg, std::ios::trunc) << "{\"model_type\": \"llama\", "; }
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(cfg) && Contains("not valid JSON"));
    reset();
    fs::remove(cfg);
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(cfg) && Contains("does not exist"));
    // transformers ≥ 5 style: rope_theta inside rope_parameters (default type) is read.
    reset();
    json j = read_json(cfg);
    j.erase("rope_theta");
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 123.0}};
    write_json(cfg, j);
    CHECK(lm::import_hf_llama(dir).config.rope_theta == 123.0);
  }
  fs::remove_all(dir);
  fs::remove_all(good);
}

TEST_CASE("hf llama: tapegrad export hf / import hf through the tool, tokenizer.json included", "[hf][tool]") {
  using namespace tapegrad::testing;
  const std::string root = temp_dir("tool");
  const std::string run = root + "/run";
  // A run directory as `tapegrad train` leaves it: a checkpoint and the byte-level tokenizer it names.
  data::BpeModel bpe;
  for (int b = 0; b < 256; ++b) bpe.vocab.emplace_back(1, char(b));
  bpe.vocab.push_back("ab");
  bpe.merges.push_back({"a", "b"});
  bpe.vocab.push_back("<|endoftext|>");
  bpe.special_tokens.push_back("<|endoftext|>");
  fs::create_directories(run + "/checkpoints");
  data::save_hf_tokenizer_json(bpe, run + "/tokenizer.json");
  nn::TransformerLMConfig c = small_config(2, true);
  c.vocab_size = 258;
  nn::TransformerLM model(c);
  randomize(model, 21);
  {
    optim::AdamW opt(model.parameters());
    Generator gen;
    optim::save_checkpoint(run + "/checkpoints/step_00000005.safetensors", model.state_dict(), opt, 5, gen,
                           model.config.to_config_map(), {{"run.tokenizer_fingerprint", data::tokenizer_fingerprint(bpe)}});
  }
  ToolResult r = run_tool({"export", "hf", run + "/checkpoints/step_00000005.safetensors", "--out", root + "/hf"}, root + "/export");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::exists(root + "/hf/config.json"));
  CHECK(fs::exists(root + "/hf/tokenizer.json"));
  r = run_tool({"import", "hf", root + "/hf", "--out", root + "/back"}, root + "/import");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const optim::Checkpoint ck = optim::read_checkpoint(root + "/back/checkpoints/step_00000000.safetensors");
  CHECK(ck.step == 0);
  CHECK(ck.extra.at("run.source") == root + "/hf");
  CHECK(ck.extra.at("run.tokenizer_fingerprint") == data::tokenizer_fingerprint(bpe));
  CHECK(data::tokenizer_fingerprint(data::load_tokenizer_model(root + "/back/tokenizer.json")) ==
        data::tokenizer_fingerprint(bpe));
  for (const auto& [name, t] : model.state_dict()) {
    INFO(name);
    CHECK(same_bits(ck.model_state.at(name), t));
  }
  // `generate` finds the tokenizer through the recorded fingerprint.
  r = run_tool({"generate", "--checkpoint", root + "/back/checkpoints/step_00000000.safetensors", "--prompt", "ab",
                "--max-tokens", "3", "--greedy"},
               root + "/generate");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  // A checkpoint with no tokenizer next to it exports without one.
  fs::copy_file(run + "/checkpoints/step_00000005.safetensors", root + "/alone.safetensors");
  r = run_tool({"export", "hf", root + "/alone.safetensors", "--out", root + "/hf2"}, root + "/export2");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(root + "/hf2/model.safetensors"));
  CHECK_FALSE(fs::exists(root + "/hf2/tokenizer.json"));
  CHECK_THAT(r.out, Catch::Contains("no tokenizer.json"));
  // Errors are one line naming the problem.
  r = run_tool({"import", "hf", root + "/missing", "--out", root + "/x"}, root + "/bad");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("import hf:") && Catch::Contains("missing"));
  r = run_tool({"export", "xml", "a"}, root + "/bad2");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown format 'xml'"));
  fs::remove_all(root);
}

namespace {

std::string shard_name(size_t i, size_t n) { return fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, n); }

// Splits dir/model.safetensors into n shards (consecutive runs of the sorted names) + the index, as
// transformers' save_pretrained lays them out, and removes the single file.
void shard(const std::string& dir, size_t n) {
  const auto all = load_safetensors(dir + "/model.safetensors");
  std::vector<std::map<std::string, Tensor>> parts(n);
  json weight_map = json::object();
  size_t k = 0, total = 0;
  for (const auto& [name, t] : all) {
    const size_t i = k++ * n / all.size();
    parts[i][name] = t;
    weight_map[name] = shard_name(i, n);
    total += size_t(t.numel()) * dtype_size(t.dtype());
  }
  for (size_t i = 0; i < n; ++i) save_safetensors(dir + "/" + shard_name(i, n), parts[i], {{"format", "pt"}});
  write_json(dir + "/model.safetensors.index.json", {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}});
  fs::remove(dir + "/model.safetensors");
}

}  // namespace

TEST_CASE("hf llama: sharded checkpoints import to the same weights and logits as the single file", "[hf]") {
  for (const auto& [n, tied] : std::vector<std::pair<size_t, bool>>{{2, false}, {3, true}, {1, false}}) {
    INFO(n << " shards, tied " << tied);
    nn::TransformerLM model(small_config(2, tied));
    randomize(model, uint32_t(30 + n));
    const std::string dir = temp_dir("sharded");
    lm::export_hf_llama(model, dir);
    const lm::HfLlama single = lm::import_hf_llama(dir);
    CHECK(single.weight_files == std::vector<std::string>{dir + "/model.safetensors"});
    shard(dir, n);
    const lm::HfLlama m = lm::import_hf_llama(dir);
    REQUIRE(m.weight_files.size() == n);
    for (size_t i = 0; i < n; ++i) CHECK(m.weight_files[i] == dir + "/" + shard_name(i, n));
    CHECK_THAT(m.weights_source, Catch::Contains("model.safetensors.index.json (" + std::to_string(n) + " shard"));
    CHECK(m.config.to_config_map() == single.config.to_config_map());
    REQUIRE(m.weights.size() == single.weights.size());
    for (const auto& [name, t] : single.weights) {
      INFO(name);
      CHECK(same_bits(m.weights.at(name), t));
    }
    nn::TransformerLM a(single.config), b(m.config);
    a.load_state_dict(single.weights);
    b.load_state_dict(m.weights);
    const Tensor ids = random_ids(2, 16, 37, 9);
    CHECK(same_bits(a(ids), b(ids)));
    CHECK(same_bits(b(ids), model(ids)));

    // Both present: model.safetensors is read, as transformers does; the (here broken) shards are not.
    lm::export_hf_llama(model, dir);
    fs::remove(dir + "/" + shard_name(0, n));
    const lm::HfLlama both = lm::import_hf_llama(dir);
    CHECK(both.weight_files == std::vector<std::string>{dir + "/model.safetensors"});
    CHECK_THAT(both.weights_source, Catch::Contains("index.json ignored"));
    fs::remove_all(dir);
  }
}

TEST_CASE("hf llama: bad sharded checkpoints are refused naming the index and the shard", "[hf]") {
  nn::TransformerLM model(small_config(2, false));
  randomize(model, 41);
  const std::string good = temp_dir("shard_good");
  lm::export_hf_llama(model, good);
  shard(good, 3);
  const std::string dir = temp_dir("shard_bad");
  auto reset = [&] {
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy(good, dir, fs::copy_options::recursive);
  };
  const std::string index = dir + "/model.safetensors.index.json";
  const std::string s1 = dir + "/" + shard_name(0, 3), s2 = dir + "/" + shard_name(1, 3);
  using Catch::Contains;
  reset();
  REQUIRE_NOTHROW(lm::import_hf_llama(dir));

  // A shard file missing.
  fs::remove(s2);
  CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(index) && Contains(s2) && Contains("does not exist"));

  // A tensor the map puts in a shard that lacks it.
  reset();
  auto part = load_safetensors(s1);
  const std::string moved = part.begin()->first;
  part.erase(moved);
  save_safetensors(s1, part);
  CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(index) && Contains("'" + moved + "'") && Contains(s1) &&
                                                  Contains("has no such tensor"));
  // ... and the same tensor only in another shard.
  auto part2 = load_safetensors(s2);
  part2[moved] = zeros({2});
  save_safetensors(s2, part2);
  CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains("'" + moved + "' is in shard '" + s2) &&
                                                  Contains("puts it in '" + s1));

  // A tensor in two shards (the map names one).
  reset();
  part2 = load_safetensors(s2);
  part2[moved] = load_safetensors(s1).at(moved);
  save_safetensors(s2, part2);
  CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(index) && Contains("'" + moved + "' is in shard '" + s2));

  // A tensor in a shard but not in the map.
  reset();
  json j = read_json(index);
  j["weight_map"].erase(moved);
  write_json(index, j);
  CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(index) && Contains(s1) && Contains("'" + moved + "'") &&
                                                  Contains("does not name"));
  // ... and not in any shard either: the model misses it.
  part = load_safetensors(s1);
  part.erase(moved);
  save_safetensors(s1, part);
  CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(index) && Contains("has no tensor '" + moved + "'"));

  // Shard names that are not plain file names in the directory.
  const std::vector<std::string> bad_names = {"../" + shard_name(0, 3), "sub/" + shard_name(0, 3), "a\\b.safetensors",
                                             "..", ".", "", "x..safetensors", good + "/" + shard_name(0, 3)};
  for (const std::string& bad : bad_names) {
    INFO("shard name '" << bad << "'");
    reset();
    j = read_json(index);
    j["weight_map"][moved] = bad;
    write_json(index, j);
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(index) && Contains("'" + moved + "'") &&
                                                    Contains("a shard must be a file name in the same directory"));
  }

  // A broken index.
  const std::vector<std::pair<json, std::string>> cases = {
      {json::array(), "is not a JSON object"},
      {{{"metadata", json::object()}}, "'weight_map' is missing"},
      {{{"weight_map", json::array()}}, "'weight_map' is missing or not an object"},
      {{{"weight_map", {{moved, 3}}}}, "weight_map entry '" + moved + "' must be a file name (is 3)"},
      {{{"metadata", "x"}, {"weight_map", json::object()}}, "'metadata' must be an object"},
  };
  for (const auto& [value, what] : cases) {
    INFO(value.dump());
    reset();
    write_json(index, value);
    CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(index) && Contains(what));
  }
  reset();
  { std::ofstream(index, std::ios::trunc) << "{\"weight_map\": {"; }
  CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(index) && Contains("not valid JSON"));
  // A shard that is not a safetensors file.
  reset();
  fs::resize_file(s2, 5);
  CHECK_THROWS_WITH(lm::import_hf_llama(dir), Contains(s2));
  fs::remove_all(dir);
  fs::remove_all(good);
}

TEST_CASE("hf llama: tapegrad import hf reads a sharded checkpoint", "[hf][tool]") {
  using namespace tapegrad::testing;
  const std::string root = temp_dir("tool_sharded");
  nn::TransformerLM model(small_config(2, true));
  randomize(model, 43);
  lm::export_hf_llama(model, root + "/hf");
  shard(root + "/hf", 2);
  const ToolResult r = run_tool({"import", "hf", root + "/hf", "--out", root + "/back"}, root + "/import");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("weights    " + root + "/hf/model.safetensors.index.json (2 shards)"));
  const optim::Checkpoint ck = optim::read_checkpoint(root + "/back/checkpoints/step_00000000.safetensors");
  for (const auto& [name, t] : model.state_dict()) {
    INFO(name);
    CHECK(same_bits(ck.model_state.at(name), t));
  }
  fs::remove_all(root);
}
