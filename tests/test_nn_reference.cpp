// test_nn_reference.cpp — nn against external references:
//  * CS336 assignment-1 fixtures (../shared/data/cs336): SDPA 3-D and 4-D with mask, RoPE, and the
//    inline softmax / SiLU / cross-entropy cases, with the CS336 tolerances (snapshot atol 1e-6,
//    rtol 1e-4; inline atol 1e-5 / 1e-4);
//  * the golden float64 LMs (../shared/data/reference, PyTorch): every hidden state, the logits,
//    the loss and every parameter gradient, in float64 (≤ 1e-10 relative) and float32 (≤ 1e-4).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/io/safetensors.h"
#include "autograd/tapegrad.h"
#include "tests/shared_fixture.h"
#include "nn/attention.h"
#include "nn/loss.h"
#include "nn/transformer_lm.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {


const std::map<std::string, Tensor>& cs336() {
  static const auto t = load_safetensors(testing::shared_path("data/cs336/test_tensors.safetensors"));
  return t;
}

// max |a − e| / (atol + rtol |e|) ≤ 1 for every element; returns max |a − e|.
double check_close(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  REQUIRE(actual.shape() == expected.shape());
  auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  double worst = 0, max_abs = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(a[i] - e[i]);
    const double r = d / (atol + rtol * std::abs(e[i]));
    if (!(r <= worst)) worst = r, at = i;
    max_abs = std::max(max_abs, d);
  }
  INFO("worst element " << at << ": " << a[at] << " vs " << e[at] << " (max |diff| " << max_abs << ")");
  CHECK(worst <= 1.0);
  return max_abs;
}

// max |a − e| / max |e|: the error relative to the tensor's scale.
double rel_error(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.shape() == expected.shape());
  auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  double d = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(a[i] - e[i]));
    s = std::max(s, std::abs(e[i]));
  }
  return s > 0 ? d / s : d;
}

Tensor from_json(const nlohmann::json& j) {
  std::vector<double> v;
  Shape s;
  if (j[0].is_array()) {
    if (j[0][0].is_array()) {
      s = {static_cast<int64_t>(j.size()), static_cast<int64_t>(j[0].size()), static_cast<int64_t>(j[0][0].size())};
      for (auto& a : j)
        for (auto& b : a)
          for (auto& c : b) v.push_back(c.get<double>());
    } else {
      s = {static_cast<int64_t>(j.size()), static_cast<int64_t>(j[0].size())};
      for (auto& a : j)
        for (auto& b : a) v.push_back(b.get<double>());
    }
  } else {
    s = {static_cast<int64_t>(j.size())};
    for (auto& a : j) v.push_back(a.get<double>());
  }
  return tensor(v, s, kFloat32);
}

nlohmann::json inline_reference() {
  std::ifstream f(testing::shared_path("data/cs336/expected/inline_reference.json"));
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

}  // namespace

TEST_CASE("CS336 scaled_dot_product_attention 3-D with mask", "[nn][cs336]") {
  auto& t = cs336();
  REQUIRE(t.at("inputs.mask").dtype() == kBool);  // U8 0/1 loads as bool, 1 = attend
  Tensor y = scaled_dot_product_attention(t.at("inputs.q"), t.at("inputs.k"), t.at("inputs.v"), t.at("inputs.mask"));
  const double e = check_close(y, t.at("expected.test_scaled_dot_product_attention"), 1e-6, 1e-4);
  fmt::print("CS336 SDPA 3-D: max |diff| {:.3g}\n", e);
}

TEST_CASE("CS336 scaled_dot_product_attention 4-D with mask", "[nn][cs336]") {
  auto& t = cs336();
  // rearrange "(batch head) seq d -> batch head seq d", head = 2
  auto split = [](const Tensor& x) { return x.reshape({2, 2, x.size(1), x.size(2)}); };
  Tensor y = scaled_dot_product_attention(split(t.at("inputs.q")), split(t.at("inputs.k")), split(t.at("inputs.v")),
                                          split(t.at("inputs.mask")));
  const double e = check_close(y, t.at("expected.test_4d_scaled_dot_product_attention"), 1e-6, 1e-4);
  fmt::print("CS336 SDPA 4-D: max |diff| {:.3g}\n", e);
}

TEST_CASE("CS336 RoPE", "[nn][cs336]") {
  auto& t = cs336();
  RotaryEmbedding rope(10000.0, 64, 12);  // d_k = d_model = 64, max_seq_len = n_queries = 12
  const double e =
      check_close(rope(t.at("inputs.in_embeddings"), t.at("inputs.pos_ids")), t.at("expected.test_rope"), 1e-6, 1e-4);
  fmt::print("CS336 RoPE: max |diff| {:.3g}\n", e);
}

TEST_CASE("CS336 inline softmax, SiLU and cross-entropy", "[nn][cs336]") {
  auto j = inline_reference();
  {
    Tensor x = from_json(j["softmax"]["input"]), e = from_json(j["softmax"]["expected"]);
    const double atol = j["softmax"]["atol"].get<double>();
    check_close(softmax(x, -1), e, atol, 0.0);
    check_close(softmax(x + j["softmax"]["also_test_input_plus"].get<double>(), -1), e, atol, 0.0);
  }
  {
    Tensor x = from_json(j["silu"]["input"]), e = from_json(j["silu"]["expected"]);
    check_close(silu(x), e, j["silu"]["atol"].get<double>(), 0.0);
  }
  {
    auto& ce = j["cross_entropy"];
    Tensor logits = from_json(ce["logits_2x4x5"]).reshape({-1, 5});
    std::vector<int64_t> tv;
    for (auto& row : ce["targets_2x4"])
      for (auto& v : row) tv.push_back(v.get<int64_t>());
    Tensor targets = from_vector<int64_t>(tv, {8});
    const double atol = ce["atol"].get<double>();
    CHECK(std::abs(cross_entropy(logits, targets).item() - ce["expected_mean"].get<double>()) <= atol);
    // 1000× logits: the test compares with torch.testing.assert_close (float32: rtol 1.3e-6)
    const double big = ce["expected_mean_logits_x1000"].get<double>();
    CHECK(std::abs(cross_entropy(logits * 1000.0, targets).item() - big) <= atol + 1.3e-6 * big);
    // the same through the [2, 4, 5] / [2, 4] shapes
    CHECK(std::abs(cross_entropy(logits.reshape({2, 4, 5}), targets.reshape({2, 4})).item() -
                   ce["expected_mean"].get<double>()) <= atol);
  }
}

namespace {

struct Golden {
  std::map<std::string, Tensor> t;
  std::map<std::string, std::string> meta;
  TransformerLMConfig config;
};

Golden load_golden(const std::string& file, DType dtype) {
  Golden g;
  g.t = load_safetensors(testing::shared_path("data/reference/" + file), &g.meta);
  auto num = [&](const char* k) { return std::stod(g.meta.at(k)); };
  g.config.vocab_size = static_cast<int64_t>(num("vocab"));
  g.config.d_model = static_cast<int64_t>(num("d_model"));
  g.config.n_layers = static_cast<int64_t>(num("layers"));
  g.config.n_heads = static_cast<int64_t>(num("heads"));
  g.config.n_kv_heads = static_cast<int64_t>(num("kv_heads"));
  g.config.d_ff = static_cast<int64_t>(num("d_ff"));
  g.config.rope_theta = num("theta");
  g.config.eps = num("eps");
  g.config.context_length = static_cast<int64_t>(num("seq"));
  g.config.dtype = dtype;
  return g;
}

// Runs the golden model in `dtype`; checks every hidden state, logits, loss and gradient against
// `tol` relative (max |diff| / max |expected|) and prints the worst of each.
void check_golden(const std::string& file, DType dtype, double tol) {
  Golden g = load_golden(file, dtype);
  TransformerLM lm(g.config);
  StateDict weights;
  for (auto& [name, t] : g.t)
    if (name.rfind("weights.", 0) == 0) weights[name.substr(8)] = t;
  lm.load_state_dict(weights);  // strict: every name of the reference matches ours
  std::vector<Tensor> hidden;
  Tensor logits = lm.forward(g.t.at("inputs.token_ids"), &hidden);
  Tensor loss = cross_entropy(logits, g.t.at("inputs.targets"));
  REQUIRE(static_cast<int64_t>(hidden.size()) == g.config.n_layers);
  double worst_hidden = 0;
  for (int64_t i = 0; i < g.config.n_layers; ++i) {
    const double e = rel_error(hidden[i], g.t.at(fmt::format("hidden.layers.{}", i)));
    INFO("hidden.layers." << i);
    CHECK(e <= tol);
    worst_hidden = std::max(worst_hidden, e);
  }
  const double e_logits = rel_error(logits, g.t.at("expected.logits"));
  CHECK(e_logits <= tol);
  const double e_loss = rel_error(loss.reshape({1}), g.t.at("expected.loss"));
  CHECK(e_loss <= tol);
  loss.backward();
  double worst_grad = 0;
  std::string worst_name;
  for (auto& [name, p] : lm.named_parameters()) {
    INFO("grads." << name);
    REQUIRE(p.grad().defined());
    const double e = rel_error(p.grad(), g.t.at("grads." + name));
    CHECK(e <= tol);
    if (e >= worst_grad) worst_grad = e, worst_name = name;
  }
  fmt::print("golden {} {}: max relative error hidden {:.3g}, logits {:.3g}, loss {:.3g}, grads {:.3g} ({})\n", file,
             dtype, worst_hidden, e_logits, e_loss, worst_grad, worst_name);
}

}  // namespace

TEST_CASE("golden LM, multi-head, float64", "[nn][golden]") { check_golden("lm_mha_seed0.safetensors", kFloat64, 1e-10); }
TEST_CASE("golden LM, grouped-query, float64", "[nn][golden]") { check_golden("lm_gqa_seed1.safetensors", kFloat64, 1e-10); }
TEST_CASE("golden LM, multi-head, float32", "[nn][golden]") { check_golden("lm_mha_seed0.safetensors", kFloat32, 1e-4); }
TEST_CASE("golden LM, grouped-query, float32", "[nn][golden]") { check_golden("lm_gqa_seed1.safetensors", kFloat32, 1e-4); }

TEST_CASE("golden LM weights load strictly and a wrong checkpoint is refused", "[nn][golden]") {
  Golden mha = load_golden("lm_mha_seed0.safetensors", kFloat64);
  Golden gqa = load_golden("lm_gqa_seed1.safetensors", kFloat64);
  TransformerLM lm(mha.config);
  StateDict other;
  for (auto& [name, t] : gqa.t)
    if (name.rfind("weights.", 0) == 0) other[name.substr(8)] = t;
  try {
    lm.load_state_dict(other);
    FAIL("no error");
  } catch (const Error& e) {
    std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("unexpected: layers.2."));
    CHECK_THAT(msg, Catch::Contains("wrong shape: token_embeddings.weight"));
    CHECK_THAT(msg, Catch::Contains("layers.0.attn.k_proj.weight (expected [64, 64], got [16, 64])"));
    CHECK_THAT(msg, Catch::Contains("token_embeddings.weight (expected [512, 64], got [300, 64])"));
  }
}

// Greedy generation through the KV cache picks exactly the ids that repeated full forwards pick.
TEST_CASE("golden LMs generate the same greedy ids through the KV cache as through full forwards", "[nn][golden][kv_cache]") {
  for (const char* file : {"lm_mha_seed0.safetensors", "lm_gqa_seed1.safetensors"}) {
    INFO(file);
    Golden g = load_golden(file, kFloat64);
    TransformerLM lm(g.config);
    StateDict weights;
    for (auto& [name, t] : g.t)
      if (name.rfind("weights.", 0) == 0) weights[name.substr(8)] = t;
    lm.load_state_dict(weights);
    NoGradGuard no_grad;
    const Tensor prompt = g.t.at("inputs.token_ids").narrow(0, 0, 1).narrow(1, 0, 3);  // [1, 3]
    const int64_t n = g.config.context_length - 3;
    // Full forwards: the whole sequence so far, every step.
    std::vector<int64_t> full_ids;
    Tensor seq = prompt.to(kInt64);
    for (int64_t i = 0; i < n; ++i) {
      const Tensor logits = lm.forward(seq);
      const int64_t next = argmax(logits.select(1, seq.size(1) - 1), -1).item<int64_t>();
      full_ids.push_back(next);
      seq = cat({seq, full({1, 1}, double(next), kInt64)}, 1);
    }
    // The cache: the prompt once, then one token at a time.
    std::vector<int64_t> cached_ids;
    KVCache cache(lm.config, 1);
    Tensor logits = lm.forward(prompt.to(kInt64), cache);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t next = argmax(logits.select(1, logits.size(1) - 1), -1).item<int64_t>();
      cached_ids.push_back(next);
      if (i + 1 < n) logits = lm.forward(full({1, 1}, double(next), kInt64), cache);
    }
    CHECK(cached_ids == full_ids);
  }
}
