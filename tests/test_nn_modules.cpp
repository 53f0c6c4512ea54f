// test_nn_modules.cpp — nn::Module bookkeeping, module shapes/values, float64 gradchecks of every
// Transformer building block, causality, and the errors for bad input and bad state dicts.
#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/tapegrad.h"
#include "nn/attention.h"
#include "nn/block.h"
#include "nn/loss.h"
#include "nn/transformer_lm.h"
#include "tests/nn_test_helpers.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {

using testing::require_gradcheck;
using testing::with_params;
Tensor project(const Tensor& y) { return testing::project(y, 7); }

Tensor rand64(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return randn(s, Options(kFloat64).requires_grad(), &g);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

TransformerLMConfig tiny_config(DType dt = kFloat64) {
  TransformerLMConfig c;
  c.vocab_size = 11;
  c.context_length = 6;
  c.d_model = 8;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 12;
  c.dtype = dt;
  return c;
}

struct Inner : Module {
  Inner() {
    w = register_parameter("w", zeros({2, 3}));
    b = register_buffer("running", ones({3}));
    register_buffer("scratch", ones({1}), /*persistent=*/false);
  }
  Tensor w, b;
};
struct Outer : Module {
  Outer() {
    a = register_parameter("a", zeros({4}));
    first = register_module("first", std::make_shared<Inner>());
    second = register_module("second", std::make_shared<Inner>());
  }
  Tensor a;
  std::shared_ptr<Inner> first, second;
};

}  // namespace

TEST_CASE("Module names parameters with dotted paths in registration order", "[nn]") {
  Outer m;
  auto named = m.named_parameters();
  REQUIRE(named.size() == 3);
  CHECK(named[0].first == "a");
  CHECK(named[1].first == "first.w");
  CHECK(named[2].first == "second.w");
  CHECK(m.parameters().size() == 3);
  CHECK(m.named_parameters(/*recurse=*/false).size() == 1);
  CHECK(m.num_parameters() == 4 + 6 + 6);
  for (auto& p : m.parameters()) CHECK(p.requires_grad());
  auto sd = m.state_dict();  // parameters and persistent buffers only
  CHECK(sd.size() == 5);
  CHECK(sd.count("first.running") == 1);
  CHECK(sd.count("first.scratch") == 0);
  CHECK(m.named_buffers().size() == 4);
  CHECK_THROWS_AS(m.register_parameter("a", zeros({1})), Error);  // duplicate name
  CHECK_THROWS_AS(m.register_parameter("x.y", zeros({1})), Error);
}

TEST_CASE("Module train and eval propagate, zero_grad clears every gradient", "[nn]") {
  Outer m;
  CHECK(m.is_training());
  m.eval();
  CHECK(!m.is_training());
  CHECK(!m.first->is_training());
  m.train();
  CHECK(m.second->is_training());
  Tensor loss = m.a.sum() + m.first->w.sum() + m.second->w.sum();
  loss.backward();
  CHECK(m.first->w.grad().defined());
  m.zero_grad();
  for (auto& p : m.parameters()) CHECK(!p.grad().defined());
}

TEST_CASE("load_state_dict copies values in place and converts dtype", "[nn]") {
  Outer m;
  StateDict sd;
  sd["a"] = tensor({1, 2, 3, 4}, kFloat64);
  sd["first.w"] = full({2, 3}, 5.0);
  sd["second.w"] = full({2, 3}, 6.0);
  sd["first.running"] = full({3}, 7.0);
  sd["second.running"] = full({3}, 8.0);
  m.load_state_dict(sd);
  CHECK(m.a.dtype() == kFloat32);
  CHECK(m.a.to_vector<double>() == std::vector<double>{1, 2, 3, 4});
  CHECK(m.second->w.to_vector<double>()[5] == 6.0);
  CHECK(m.first->b.to_vector<double>()[0] == 7.0);
  CHECK(m.state_dict().at("second.w").to_vector<double>()[0] == 6.0);
}

TEST_CASE("strict load_state_dict lists every missing, unexpected and mis-shaped name", "[nn]") {
  Outer m;
  StateDict sd = m.state_dict();
  sd.erase("first.w");
  sd.erase("second.running");
  sd["extra.weight"] = zeros({1});
  sd["a"] = zeros({5});
  try {
    m.load_state_dict(sd);
    FAIL("no error");
  } catch (const Error& e) {
    std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("missing: first.w, second.running"));
    CHECK_THAT(msg, Catch::Contains("unexpected: extra.weight"));
    CHECK_THAT(msg, Catch::Contains("wrong shape: a"));
  }
  sd["a"] = ones({4});
  m.load_state_dict(sd, /*strict=*/false);  // missing/unexpected are skipped
  CHECK(m.a.to_vector<double>()[0] == 1.0);
  sd["a"] = ones({3});
  CHECK_THROWS_AS(m.load_state_dict(sd, false), Error);  // a wrong shape is always an error
}

TEST_CASE("Linear computes x W-transpose plus b and initializes within 3 sigma", "[nn]") {
  Generator g(1);
  Linear lin(30, 20, /*bias=*/true, kFloat64, &g);
  CHECK(lin.weight.shape() == Shape{20, 30});
  const double s = std::sqrt(2.0 / 50.0);
  for (double w : lin.weight.to_vector<double>()) CHECK(std::abs(w) <= 3 * s);
  Tensor x = rand64({2, 5, 30}, 2);
  {
    NoGradGuard ng;
    lin.bias.copy_(tensor(std::vector<double>(20, 0.5), kFloat64));
  }
  Tensor expect = matmul(x, transpose(lin.weight, 0, 1)) + 0.5;
  CHECK(max_abs_diff(lin(x), expect) < 1e-12);
  CHECK(lin.named_parameters().size() == 2);
  Linear nob(3, 4);
  CHECK(nob.named_parameters().size() == 1);
  CHECK_THROWS_AS(nob(zeros({2, 5})), Error);
}

TEST_CASE("Embedding looks rows up and rejects out-of-range ids", "[nn]") {
  Generator g(3);
  Embedding emb(10, 4, kFloat64, &g);
  for (double w : emb.weight.to_vector<double>()) CHECK(std::abs(w) <= 3.0);
  Tensor ids = from_vector<int64_t>({3, 0, 9, 3}, {2, 2});
  Tensor y = emb(ids);
  CHECK(y.shape() == Shape{2, 2, 4});
  CHECK(max_abs_diff(select(select(y, 0, 0), 0, 0), select(emb.weight, 0, 3)) == 0.0);
  CHECK_THROWS_WITH(emb(from_vector<int64_t>({10}, {1})), Catch::Contains("out of range"));
  CHECK_THROWS_AS(emb(from_vector<int64_t>({-1}, {1})), Error);
}

TEST_CASE("RMSNorm matches its formula and gradchecks", "[nn][gradcheck]") {
  RMSNorm norm(5, 1e-5, kFloat64);
  Tensor x = rand64({2, 3, 5}, 4);
  auto xv = x.to_vector<double>();
  auto yv = norm(x).to_vector<double>();
  for (int r = 0; r < 6; ++r) {
    double ms = 0;
    for (int c = 0; c < 5; ++c) ms += xv[r * 5 + c] * xv[r * 5 + c] / 5;
    for (int c = 0; c < 5; ++c) CHECK(yv[r * 5 + c] == Approx(xv[r * 5 + c] / std::sqrt(ms + 1e-5)).epsilon(1e-12));
  }
  {
    NoGradGuard ng;
    norm.weight.copy_(rand64({5}, 5));
  }
  require_gradcheck([&](const std::vector<Tensor>& in) { return project(norm(in[0])); }, with_params(x, norm));
  // float32 input stays float32
  RMSNorm n32(5);
  CHECK(n32(randn({2, 5})).dtype() == kFloat32);
}

TEST_CASE("RoPE rotates interleaved pairs and gradchecks", "[nn][gradcheck]") {
  RotaryEmbedding rope(10000.0, 4, 8, kFloat64);
  Tensor x = rand64({2, 3, 4}, 6);
  Tensor pos = from_vector<int64_t>({0, 5, 7}, {3});
  auto xv = x.to_vector<double>();
  auto yv = rope(x, pos).to_vector<double>();
  const int64_t p[3] = {0, 5, 7};
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 3; ++t)
      for (int k = 0; k < 2; ++k) {
        const double a = p[t] * std::pow(10000.0, -2.0 * k / 4.0);
        const size_t i = (b * 3 + t) * 4 + 2 * k;
        CHECK(yv[i] == Approx(xv[i] * std::cos(a) - xv[i + 1] * std::sin(a)).margin(1e-12));
        CHECK(yv[i + 1] == Approx(xv[i] * std::sin(a) + xv[i + 1] * std::cos(a)).margin(1e-12));
      }
  CHECK(rope.state_dict().empty());  // tables are non-persistent
  require_gradcheck([&](const std::vector<Tensor>& in) { return project(rope(in[0], pos)); }, {x});
  CHECK_THROWS_WITH(rope(x, from_vector<int64_t>({0, 1, 8}, {3})), Catch::Contains("outside the table"));
  CHECK_THROWS_AS(RotaryEmbedding(10000.0, 3, 4), Error);
}

TEST_CASE("scaled_dot_product_attention matches a loop and gradchecks with a mask", "[nn][gradcheck]") {
  Tensor q = rand64({2, 3, 4}, 7), k = rand64({2, 5, 4}, 8), v = rand64({2, 5, 2}, 9);
  Generator g(10);
  Tensor mask = gt(rand({2, 3, 5}, kFloat64, &g), 0.4);
  {  // keep every query row with at least one visible key
    auto mv = mask.to_vector<int64_t>();
    std::vector<double> fixed(mv.begin(), mv.end());
    for (int r = 0; r < 6; ++r) fixed[r * 5] = 1;
    mask = ne(tensor(fixed, {2, 3, 5}, kFloat64), 0.0);
  }
  Tensor y = scaled_dot_product_attention(q, k, v, mask);
  auto qv = q.to_vector<double>(), kv = k.to_vector<double>(), vv = v.to_vector<double>();
  auto mv = mask.to_vector<int64_t>();
  auto yv = y.to_vector<double>();
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i) {
      std::vector<double> s(5);
      double mx = -1e300, z = 0;
      for (int j = 0; j < 5; ++j) {
        double d = 0;
        for (int c = 0; c < 4; ++c) d += qv[(b * 3 + i) * 4 + c] * kv[(b * 5 + j) * 4 + c];
        s[j] = mv[(b * 3 + i) * 5 + j] ? d / 2.0 : -INFINITY;
        mx = std::max(mx, s[j]);
      }
      for (int j = 0; j < 5; ++j) z += std::exp(s[j] - mx);
      for (int c = 0; c < 2; ++c) {
        double o = 0;
        for (int j = 0; j < 5; ++j) o += std::exp(s[j] - mx) / z * vv[(b * 5 + j) * 2 + c];
        CHECK(yv[(b * 3 + i) * 2 + c] == Approx(o).margin(1e-12));
      }
    }
  require_gradcheck(
      [&](const std::vector<Tensor>& in) { return project(scaled_dot_product_attention(in[0], in[1], in[2], mask)); },
      {q, k, v});
  // 4-D with a broadcast mask
  Tensor q4 = rand64({2, 2, 3, 4}, 11), k4 = rand64({2, 2, 3, 4}, 12), v4 = rand64({2, 2, 3, 4}, 13);
  require_gradcheck([&](const std::vector<Tensor>& in) {
    return project(scaled_dot_product_attention(in[0], in[1], in[2], causal_mask(3)));
  }, {q4, k4, v4});
}

TEST_CASE("causal self-attention with and without GQA gradchecks", "[nn][gradcheck]") {
  for (int64_t kv : {4, 2, 1}) {
    INFO("n_kv_heads " << kv);
    Generator g(20 + kv);
    auto rope = std::make_shared<RotaryEmbedding>(10000.0, 2, 8, kFloat64);
    CausalSelfAttention attn(8, 4, kv, rope, kFloat64, &g);
    CHECK(attn.k_proj->weight.shape() == Shape{kv * 2, 8});
    Tensor x = rand64({2, 3, 8}, 30);
    CHECK(attn(x).shape() == Shape{2, 3, 8});
    require_gradcheck([&](const std::vector<Tensor>& in) { return project(attn(in[0])); }, with_params(x, attn));
  }
}

TEST_CASE("GQA equals multi-head attention with each kv head repeated", "[nn]") {
  Generator g(40);
  auto rope = std::make_shared<RotaryEmbedding>(10000.0, 2, 8, kFloat64);
  CausalSelfAttention gqa(8, 4, 2, rope, kFloat64, &g);
  CausalSelfAttention mha(8, 4, 4, rope, kFloat64, &g);
  {  // mha's kv head h = gqa's kv head h / 2: rows [2h, 2h+2) of k/v weights
    NoGradGuard ng;
    mha.q_proj->weight.copy_(gqa.q_proj->weight);
    mha.output_proj->weight.copy_(gqa.output_proj->weight);
    for (int64_t h = 0; h < 4; ++h) {
      mha.k_proj->weight.narrow(0, 2 * h, 2).copy_(gqa.k_proj->weight.narrow(0, 2 * (h / 2), 2));
      mha.v_proj->weight.narrow(0, 2 * h, 2).copy_(gqa.v_proj->weight.narrow(0, 2 * (h / 2), 2));
    }
  }
  Tensor x = rand64({2, 5, 8}, 41);
  CHECK(max_abs_diff(gqa(x), mha(x)) < 1e-12);
}

TEST_CASE("SwiGLU matches its formula and gradchecks", "[nn][gradcheck]") {
  CHECK(SwiGLU::default_d_ff(64) == 192);
  CHECK(SwiGLU::default_d_ff(768) == 2048);
  Generator g(50);
  SwiGLU ffn(4, 6, kFloat64, &g);
  Tensor x = rand64({2, 3, 4}, 51);
  Tensor a = matmul(x, ffn.w1->weight.t()), b = matmul(x, ffn.w3->weight.t());
  Tensor expect = matmul(a * sigmoid(a) * b, ffn.w2->weight.t());
  CHECK(max_abs_diff(ffn(x), expect) < 1e-12);
  require_gradcheck([&](const std::vector<Tensor>& in) { return project(ffn(in[0])); }, with_params(x, ffn));
}

TEST_CASE("a Transformer block gradchecks", "[nn][gradcheck]") {
  Generator g(60);
  auto rope = std::make_shared<RotaryEmbedding>(10000.0, 4, 8, kFloat64);
  TransformerBlock block(8, 2, 1, 12, rope, 1e-5, kFloat64, &g);
  {
    NoGradGuard ng;
    block.ln1->weight.copy_(rand64({8}, 61));
    block.ln2->weight.copy_(rand64({8}, 62));
  }
  std::vector<std::string> names;
  for (auto& [n, p] : block.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"ln1.weight", "attn.q_proj.weight", "attn.k_proj.weight",
                                          "attn.v_proj.weight", "attn.output_proj.weight", "ln2.weight",
                                          "ffn.w1.weight", "ffn.w2.weight", "ffn.w3.weight"});
  Tensor x = rand64({1, 3, 8}, 63);
  require_gradcheck([&](const std::vector<Tensor>& in) { return project(block(in[0])); }, with_params(x, block));
}

TEST_CASE("cross_entropy matches its formula, ignores ignore_index and gradchecks", "[nn][gradcheck]") {
  Tensor logits = rand64({2, 3, 5}, 70);
  Tensor targets = from_vector<int64_t>({1, 4, -100, 0, 2, 3}, {2, 3});
  auto lv = logits.to_vector<double>();
  auto tv = targets.to_vector<int64_t>();
  double total = 0;
  for (int r = 0; r < 6; ++r) {
    if (tv[r] == -100) continue;
    double mx = -1e300, z = 0;
    for (int c = 0; c < 5; ++c) mx = std::max(mx, lv[r * 5 + c]);
    for (int c = 0; c < 5; ++c) z += std::exp(lv[r * 5 + c] - mx);
    total += -(lv[r * 5 + tv[r]] - mx - std::log(z));
  }
  CHECK(cross_entropy(logits, targets).item() == Approx(total / 5).epsilon(1e-13));
  require_gradcheck([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets); }, {logits});
  // stable for huge logits
  Tensor big = tensor({1e4, -1e4, 0.0, 1e4 - 1}, {1, 4}, kFloat64);
  double ce = cross_entropy(big, from_vector<int64_t>({3}, {1})).item();
  CHECK(ce == Approx(1.0 + std::log1p(std::exp(-1.0))).epsilon(1e-12));
  CHECK(std::isfinite(cross_entropy(big.to(kFloat32), from_vector<int64_t>({1}, {1})).item()));
  CHECK_THROWS_WITH(cross_entropy(logits, from_vector<int64_t>({1, 5, 0, 0, 0, 0}, {2, 3})),
                    Catch::Contains("out of range"));
  CHECK_THROWS_AS(cross_entropy(logits, from_vector<int64_t>({1, 2}, {2})), Error);
}

TEST_CASE("TransformerLM names its parameters as CS336 and gradchecks end to end", "[nn][gradcheck]") {
  Generator g(80);
  TransformerLMConfig c = tiny_config();
  c.n_layers = 1;
  TransformerLM lm(c, &g);
  auto sd = lm.state_dict();
  CHECK(sd.count("token_embeddings.weight") == 1);
  CHECK(sd.count("layers.0.attn.output_proj.weight") == 1);
  CHECK(sd.count("layers.0.ffn.w3.weight") == 1);
  CHECK(sd.count("ln_final.weight") == 1);
  CHECK(sd.at("lm_head.weight").shape() == Shape{11, 8});
  CHECK(sd.size() == 1 + 9 + 2);
  Tensor ids = from_vector<int64_t>({1, 5, 10, 0, 3, 3, 7, 2}, {2, 4});
  Tensor targets = from_vector<int64_t>({5, 10, 0, 3, 3, 7, 2, 1}, {2, 4});
  std::vector<Tensor> params = lm.parameters();
  require_gradcheck([&](const std::vector<Tensor>&) { return cross_entropy(lm(ids), targets); }, params);
}

TEST_CASE("TransformerLM with tied embeddings has no lm_head", "[nn]") {
  Generator g(81);
  TransformerLMConfig c = tiny_config();
  c.tie_embeddings = true;
  TransformerLM lm(c, &g);
  CHECK(lm.lm_head == nullptr);
  CHECK(lm.state_dict().count("lm_head.weight") == 0);
  Tensor ids = from_vector<int64_t>({1, 5, 10}, {1, 3});
  std::vector<Tensor> hidden;
  Tensor logits = lm.forward(ids, &hidden);
  CHECK(hidden.size() == 2);
  Tensor expect = matmul(lm.ln_final->forward(hidden.back()), lm.token_embeddings->weight.t());
  CHECK(max_abs_diff(logits, expect) < 1e-12);
}

TEST_CASE("TransformerLM is causal: logits at t ignore tokens after t", "[nn]") {
  Generator g(90);
  TransformerLM lm(tiny_config(), &g);
  Tensor a = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {1, 6});
  Tensor b = from_vector<int64_t>({1, 2, 3, 9, 0, 10}, {1, 6});
  Tensor la = lm(a), lb = lm(b);
  CHECK(max_abs_diff(la.narrow(1, 0, 3), lb.narrow(1, 0, 3)) == 0.0);
  CHECK(max_abs_diff(la.narrow(1, 3, 1), lb.narrow(1, 3, 1)) > 1e-6);
  // a prefix gives the same logits as the full sequence at the same positions
  CHECK(max_abs_diff(lm(a.narrow(1, 0, 4)), la.narrow(1, 0, 4)) < 1e-12);
}

TEST_CASE("TransformerLM rejects bad configs and bad input", "[nn]") {
  TransformerLMConfig c = tiny_config();
  c.n_heads = 3;
  CHECK_THROWS_WITH(TransformerLM(c), Catch::Contains("not divisible by n_heads"));
  c = tiny_config();
  c.n_kv_heads = 3;
  CHECK_THROWS_WITH(TransformerLM(c), Catch::Contains("not divisible by n_kv_heads"));
  CHECK_THROWS_AS(CausalSelfAttention(10, 4), Error);
  CHECK_THROWS_AS(CausalSelfAttention(8, 4, 3), Error);
  TransformerLM lm(tiny_config());
  CHECK_THROWS_WITH(lm(from_vector<int64_t>({1, 11}, {1, 2})), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(lm(zeros({1, 7}, kInt64)), Catch::Contains("context_length"));
  CHECK_THROWS_AS(lm(zeros({7}, kInt64)), Error);
  CHECK_THROWS_AS(lm(zeros({1, 2}, kFloat32)), Error);
}

TEST_CASE("attention with RoPE depends only on relative positions", "[nn]") {
  Generator g(95);
  auto rope = std::make_shared<RotaryEmbedding>(10000.0, 4, 16, kFloat64);
  CausalSelfAttention attn(8, 2, 1, rope, kFloat64, &g);
  Tensor x = rand64({2, 5, 8}, 96);
  Tensor at0 = attn(x, arange(0, 5));
  Tensor at7 = attn(x, arange(7, 12));  // every position shifted by 7
  CHECK(max_abs_diff(at0, at7) < 1e-12);
  CHECK(max_abs_diff(at0, attn(x)) == 0.0);  // default positions are 0..T−1
  CHECK_THROWS_WITH(attn(x, arange(12, 17)), Catch::Contains("outside the table"));
  CHECK_THROWS_AS(attn(x, arange(0, 4)), Error);  // positions must be [T]
}

TEST_CASE("Module to(device) moves in place, or refuses an unavailable device and moves nothing", "[nn]") {
  Generator gen(4);
  nn::TransformerLMConfig cfg;
  cfg.vocab_size = 11, cfg.context_length = 6, cfg.d_model = 8, cfg.n_layers = 1, cfg.n_heads = 2, cfg.d_ff = 16;
  nn::TransformerLM lm(cfg, &gen);
  const Tensor ids = from_vector<int64_t>({1, 2, 3, 4}, {1, 4});
  const std::vector<float> before = lm(ids).to_vector<float>();
  const Tensor w = lm.token_embeddings->weight;  // a handle the module also holds
  const void* data = w.data_ptr();
  lm.to(Device::cpu());  // already there: nothing is copied
  CHECK(w.data_ptr() == data);
  bool moved = false;
  try {
    lm.to(Device::cuda(0));
    moved = true;
  } catch (const Error& e) {
    // No CUDA backend in this build/machine: a clear error, and every tensor stayed where it was.
    INFO(e.what());
    CHECK(std::string(e.what()).find("cuda") != std::string::npos);
    for (const auto& [name, p] : lm.named_parameters()) CHECK(p.device() == Device::cpu());
    CHECK(w.data_ptr() == data);
  }
  if (moved) {  // a CUDA machine: the held handle moved too, and the round trip keeps every value
    CHECK(w.device() == Device::cuda(0));
    lm.to(Device::cpu());
  }
  CHECK(lm(ids).to_vector<float>() == before);
}

TEST_CASE("Module registration refuses empty, dotted and duplicate names, undefined or non-leaf tensors, null modules",
          "[nn]") {
  Module m;
  m.register_parameter("w", zeros({2}));
  m.register_buffer("b", zeros({2}));
  m.register_module("child", std::make_shared<Linear>(2, 2));
  CHECK_THROWS_WITH(m.register_parameter("", zeros({1})), Catch::Contains("a name must be non-empty and contain no '.', got ''"));
  CHECK_THROWS_WITH(m.register_buffer("a.b", zeros({1})), Catch::Contains("got 'a.b'"));
  CHECK_THROWS_WITH(m.register_module(".x", std::make_shared<Linear>(2, 2)), Catch::Contains("got '.x'"));
  for (const char* taken : {"w", "b", "child"}) {
    INFO(taken);
    CHECK_THROWS_WITH(m.register_parameter(taken, zeros({1})), Catch::Contains(fmt::format("the name '{}' is already registered", taken)));
    CHECK_THROWS_WITH(m.register_buffer(taken, zeros({1})), Catch::Contains("already registered"));
    CHECK_THROWS_WITH(m.register_module(taken, std::make_shared<Linear>(2, 2)), Catch::Contains("already registered"));
  }
  CHECK_THROWS_WITH(m.register_parameter("u", Tensor()), Catch::Contains("Module::register_parameter: 'u' is undefined"));
  CHECK_THROWS_WITH(m.register_buffer("u", Tensor()), Catch::Contains("Module::register_buffer: 'u' is undefined"));
  const Tensor x = zeros({2}, Options().requires_grad());
  CHECK_THROWS_WITH(m.register_parameter("y", x * 2.0), Catch::Contains("'y' must be a leaf (detach it first)"));
  CHECK_THROWS_WITH(m.register_module("n", std::shared_ptr<Linear>()), Catch::Contains("Module::register_module: 'n' is null"));
  // nothing refused was registered
  CHECK(m.named_parameters().size() == 2);  // w and child.weight
  CHECK(m.state_dict().size() == 3);        // + the buffer b
}
