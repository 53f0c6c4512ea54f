// test_modern_architecture.cpp — the modern options of TransformerLMConfig (nn/transformer_lm.h): the ReLU²
// feed-forward against its formula, QK-norm against the composition, gain-less norms, the norm after the
// embedding, zero-initialised projections and the logit soft-cap; a float64 gradcheck of the whole model with
// each option alone and all together; the KV cache against the full forward; the parameter count; the config
// map (written only when not default, old maps still read); and the exports that cannot hold them refusing.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "autograd/tapegrad.h"
#include "lm/hf_llama.h"
#include "lm/llama2c_export.h"
#include "nn/kv_cache.h"
#include "nn/loss.h"
#include "nn/relu_squared.h"
#include "nn/transformer_lm.h"
#include "tests/nn_test_helpers.h"
#include "tests/test_data_helpers.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {

using nn::testing::require_gradcheck;
using nn::testing::with_params;
Tensor project(const Tensor& y, uint64_t seed) { return nn::testing::project(y, seed); }

Tensor rand64(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return randn(s, Options(kFloat64).requires_grad(), &g);
}

TransformerLMConfig tiny_config(DType dt = kFloat64) {
  TransformerLMConfig c;
  c.vocab_size = 11;
  c.context_length = 12;
  c.d_model = 8;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.d_ff = 12;
  c.dtype = dt;
  return c;
}

// One option at a time, then all of them (zero_init_projections is left out of the gradcheck's list: a zero
// projection makes the gradients of everything before it zero, which checks less; it has its own test).
struct Variant {
  const char* name;
  void (*apply)(TransformerLMConfig&);
};
const Variant kVariants[] = {
    {"relu2", [](TransformerLMConfig& c) { c.ffn = FFNKind::ReLU2; }},
    {"qk_norm", [](TransformerLMConfig& c) { c.qk_norm = true; }},
    {"no gain", [](TransformerLMConfig& c) { c.norm_gain = false; }},
    {"embed_norm", [](TransformerLMConfig& c) { c.embed_norm = true; }},
    {"softcap", [](TransformerLMConfig& c) { c.logit_softcap = 2.5; }},
    {"all", [](TransformerLMConfig& c) {
       c.ffn = FFNKind::ReLU2, c.qk_norm = true, c.norm_gain = false, c.embed_norm = true, c.logit_softcap = 2.5;
       c.tie_embeddings = true;
     }},
    {"all with gains", [](TransformerLMConfig& c) {
       c.ffn = FFNKind::ReLU2, c.qk_norm = true, c.embed_norm = true, c.logit_softcap = 3.0;
     }},
};

double max_abs(const Tensor& t) { return t.to(kFloat64).abs().max().item<double>(); }

}  // namespace

TEST_CASE("ReLU² feed-forward matches relu(w1 x)² and gradchecks", "[nn][gradcheck][modern]") {
  Generator g(5);
  ReluSquaredFFN ffn(8, 0, kFloat64, &g);
  CHECK(ffn.d_ff == 32);  // 4·C by default
  CHECK(ffn.w3 == nullptr);
  CHECK(ffn.named_parameters().size() == 2);
  const Tensor x = rand64({2, 3, 8}, 6);
  const Tensor a = matmul(x, ffn.w1->weight.t());
  const Tensor r = relu(a);
  CHECK(max_abs(ffn(x) - matmul(r * r, ffn.w2->weight.t())) < 1e-12);
  CHECK(max_abs(ffn(x) - ffn.forward_reference(x)) < 1e-12);
  require_gradcheck([&](const std::vector<Tensor>& in) { return project(ffn(in[0]), 7); },
                    with_params(x, ffn));
  CHECK(default_d_ff(FFNKind::SwiGLU, 64) == 192);
  CHECK(ffn_kind_from_string("relu2") == FFNKind::ReLU2);
  CHECK_THROWS_WITH(ffn_kind_from_string("gelu"), Catch::Contains("swiglu or relu2") && Catch::Contains("gelu"));
}

TEST_CASE("QK-norm: fused attention equals the composition, each head's q and k normalized", "[nn][gradcheck][modern]") {
  for (bool gain : {true, false}) {
    INFO("gain " << gain);
    Generator g(21);
    auto rope = std::make_shared<RotaryEmbedding>(10000.0, 4, 8, kFloat64);
    // eps 1e-12 (the norms' own), so that scaling q below changes nothing measurable
    CausalSelfAttention attn(8, 2, 1, rope, kFloat64, &g, /*qk_norm=*/true, gain, 1e-12);
    REQUIRE(attn.q_norm);
    CHECK(attn.named_parameters().size() == (gain ? 6u : 4u));  // q, k, v, o (+ q_norm, k_norm gains)
    if (gain) {
      NoGradGuard ng;
      attn.q_norm->weight.copy_(rand64({4}, 22).detach());
      attn.k_norm->weight.copy_(rand64({4}, 23).detach());
    }
    const Tensor x = rand64({2, 5, 8}, 24);
    CHECK(max_abs(attn(x) - attn.forward_reference(x)) < 1e-12);
    // Scaling a head's query by 100 changes nothing: it is normalized (the same x, q_proj's rows scaled).
    CausalSelfAttention scaled(8, 2, 1, rope, kFloat64, &g, true, gain, 1e-12);
    {
      NoGradGuard ng;
      scaled.load_state_dict(attn.state_dict());
      scaled.q_proj->weight.mul_(100.0);
    }
    CHECK(max_abs(scaled(x) - attn(x)) < 1e-9);
    require_gradcheck([&](const std::vector<Tensor>& in) { return project(attn(in[0]), 9); },
                      with_params(x, attn));
  }
}

TEST_CASE("RMSNorm without a gain: no parameter, no state, x / rms(x)", "[nn][modern]") {
  RMSNorm norm(4, 1e-5, kFloat64, /*gain=*/false);
  CHECK(norm.named_parameters().empty());
  CHECK(norm.state_dict().empty());
  const Tensor x = rand64({3, 4}, 31);
  const Tensor expect = x * rsqrt(mean(x * x, {-1}, true) + 1e-5);
  CHECK(max_abs(norm(x) - expect) < 1e-12);
  CHECK(max_abs(norm.forward_add(x, Tensor()).normed - expect) < 1e-12);
}

TEST_CASE("Modern options: the whole model gradchecks in float64, each alone and all together",
          "[nn][gradcheck][modern]") {
  const Tensor ids = from_vector<int64_t>({1, 5, 10, 0, 3, 3, 7, 2}, {2, 4});
  const Tensor targets = from_vector<int64_t>({5, 10, 0, 3, 3, 7, 2, 1}, {2, 4});
  for (const Variant& v : kVariants) {
    INFO(v.name);
    TransformerLMConfig c = tiny_config();
    c.n_layers = 1;
    v.apply(c);
    Generator g(80);
    TransformerLM lm(c, &g);
    CHECK(double(lm.num_parameters()) == c.parameter_count());
    require_gradcheck([&](const std::vector<Tensor>&) { return cross_entropy(lm(ids), targets); }, lm.parameters());
  }
}

TEST_CASE("Modern options: parameter names and counts", "[nn][modern]") {
  TransformerLMConfig c = tiny_config();
  c.ffn = FFNKind::ReLU2, c.qk_norm = true, c.embed_norm = true;
  c.d_ff = 0;
  Generator g(1);
  TransformerLM lm(c, &g);
  const auto sd = lm.state_dict();
  CHECK(sd.count("embed_norm.weight") == 1);
  CHECK(sd.at("layers.1.attn.q_norm.weight").shape() == Shape{4});
  CHECK(sd.at("layers.1.attn.k_norm.weight").shape() == Shape{4});
  CHECK(sd.count("layers.0.ffn.w3.weight") == 0);
  CHECK(sd.at("layers.0.ffn.w1.weight").shape() == Shape{32, 8});  // 4·C
  CHECK(lm.config.d_ff == 32);
  CHECK(double(lm.num_parameters()) == c.parameter_count());
  c.norm_gain = false;
  TransformerLM bare(c, &g);
  for (const auto& [name, t] : bare.state_dict()) CHECK(name.find("norm") == std::string::npos);
  CHECK(double(bare.num_parameters()) == c.parameter_count());
  CHECK(bare.device() == Device::cpu());  // the final norm's constant gain says where the model is
}

TEST_CASE("Zero-initialised projections: every block starts as the identity", "[nn][modern]") {
  TransformerLMConfig c = tiny_config();
  c.zero_init_projections = true;
  Generator g(3), g2(3);
  TransformerLM lm(c, &g);
  TransformerLMConfig plain_config = tiny_config();
  TransformerLM plain(plain_config, &g2);
  for (const auto& b : lm.blocks) {
    CHECK(max_abs(b->attn->output_proj->weight) == 0);
    CHECK(max_abs(b->ffn->w2->weight) == 0);
  }
  // The other weights are those of the model without the option (the same random draws).
  CHECK(max_abs(lm.blocks[0]->attn->q_proj->weight - plain.blocks[0]->attn->q_proj->weight) == 0);
  CHECK(max_abs(lm.lm_head->weight - plain.lm_head->weight) == 0);
  // Blocks are the identity: the logits are the head of the normalized embedding.
  const Tensor ids = from_vector<int64_t>({1, 5, 10, 0}, {1, 4});
  NoGradGuard ng;
  const Tensor expect = lm.lm_head->forward(lm.ln_final->forward(lm.token_embeddings->forward(ids)));
  CHECK(max_abs(lm(ids) - expect) < 1e-12);
}

TEST_CASE("Logit soft-cap: c·tanh(z/c), never beyond ±c", "[nn][modern]") {
  TransformerLMConfig c = tiny_config();
  Generator g(4), g2(4);
  TransformerLM plain(c, &g);
  c.logit_softcap = 0.5;
  TransformerLM capped(c, &g2);
  const Tensor ids = from_vector<int64_t>({1, 5, 10, 0, 3}, {1, 5});
  NoGradGuard ng;
  const Tensor z = plain(ids), y = capped(ids);
  CHECK(max_abs(y - tanh(z * 2.0) * 0.5) < 1e-12);
  CHECK(max_abs(y) < 0.5);
  c.logit_softcap = -1;
  CHECK_THROWS_WITH(TransformerLM(c), Catch::Contains("logit_softcap -1"));
}

TEST_CASE("Modern options: cached logits equal the full forward", "[nn][kv_cache][modern]") {
  for (const Variant& v : kVariants) {
    for (DType dt : {kFloat64, kFloat32}) {
      INFO(v.name << " " << dtype_name(dt));
      TransformerLMConfig c = tiny_config(dt);
      v.apply(c);
      Generator g(12);
      TransformerLM lm(c, &g);
      const Tensor ids = randint(0, 11, {2, 10}, kInt64, &g);
      NoGradGuard ng;
      const Tensor full = lm.forward(ids);
      KVCache cache(lm.config, 2);
      const Tensor prompt = lm.forward(ids.narrow(1, 0, 4), cache);
      const double tol = dt == kFloat64 ? 1e-12 : 1e-5;
      CHECK(max_abs(prompt - full.narrow(1, 0, 4)) <= tol * max_abs(full));
      for (int64_t t = 4; t < 10; ++t) {
        const Tensor step = lm.forward(ids.narrow(1, t, 1), cache);
        CHECK(max_abs(step - full.narrow(1, t, 1)) <= tol * max_abs(full));
      }
    }
  }
}

TEST_CASE("Modern options in the config map: written when not default, old maps read, bad values refused",
          "[nn][modern]") {
  const TransformerLMConfig plain = tiny_config();
  CHECK(plain.to_config_map().size() == 11);  // a Llama config (and every older checkpoint) holds 11 keys
  CHECK(plain.non_llama_options().empty());
  TransformerLMConfig c = plain;
  c.ffn = FFNKind::ReLU2, c.qk_norm = true, c.norm_gain = false, c.embed_norm = true, c.zero_init_projections = true;
  c.logit_softcap = 15.5;
  const auto m = c.to_config_map();
  CHECK(m.size() == 17);
  CHECK(m.at("ffn") == "relu2");
  CHECK(m.at("logit_softcap") == "15.5");
  const TransformerLMConfig back = TransformerLMConfig::from_config_map(m);
  CHECK(back.to_config_map() == m);
  CHECK(back.ffn == FFNKind::ReLU2);
  CHECK((back.qk_norm && !back.norm_gain && back.embed_norm && back.zero_init_projections));
  CHECK(back.logit_softcap == 15.5);
  CHECK(c.non_llama_options() == std::vector<std::string>{"--ffn relu2", "--qk-norm true", "--norm-gain false",
                                                          "--embed-norm true", "--logit-softcap 15.5"});
  auto bad = m;
  bad["ffn"] = "gelu";
  bad["qk_norm"] = "yes";
  bad["logit_softcap"] = "-3";
  CHECK_THROWS_WITH(TransformerLMConfig::from_config_map(bad),
                    Catch::Contains("'ffn' = 'gelu'") && Catch::Contains("'qk_norm' = 'yes'") &&
                        Catch::Contains("'logit_softcap' = '-3'"));
}

TEST_CASE("Exports refuse a model with modern options, naming them", "[lm][modern]") {
  tapegrad::data::testing::ScratchDir dir("modern_export");
  TransformerLMConfig c = tiny_config(kFloat32);
  c.qk_norm = true, c.ffn = FFNKind::ReLU2;
  TransformerLM lm(c);
  const std::string bin = (dir.path / "m.bin").string(), hf = (dir.path / "hf").string();
  CHECK_THROWS_WITH(lm::export_llama2c(lm, bin, {}),
                    Catch::Contains("export llama2c") && Catch::Contains("--ffn relu2, --qk-norm true"));
  CHECK_THROWS_WITH(lm::export_hf_llama(lm, hf, std::nullopt),
                    Catch::Contains("export hf") && Catch::Contains("--ffn relu2, --qk-norm true"));
  CHECK(!std::filesystem::exists(bin));
  CHECK(!std::filesystem::exists(hf));
  // zero_init_projections leaves no trace in the weights: such a model exports.
  TransformerLMConfig z = tiny_config(kFloat32);
  z.zero_init_projections = true;
  CHECK(z.non_llama_options().empty());
}
