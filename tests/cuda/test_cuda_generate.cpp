// test_cuda_generate.cpp — inference on cuda:0 (`eval`, `generate` and `chat` with --device cuda):
//  * lm::generate on a model moved to cuda:0 gives the CPU's greedy tokens, and with temperature /
//    top-k / top-p the CPU's sampled tokens for the same seed (the row is drawn on the host);
//  * the KV cache lives on the device and a cached forward there gives the CPU's logits;
//  * lm::next_token on device logits: the argmax (lowest id among ties), NaN refused;
//  * lm::evaluate on cuda:0 gives the CPU's loss within float32 tolerance;
//  * lm::ChatSession (tapegrad chat) on cuda:0 holds the CPU's conversation, its cache on the device.
#include <limits>
#include <memory>
#include <set>

#include "lm/chat_session.h"
#include "lm/evaluate.h"
#include "lm/generate.h"
#include "nn/kv_cache.h"
#include "tests/chat_fixture.h"
#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

namespace {

nn::TransformerLMConfig tiny_config(DType dtype) {
  nn::TransformerLMConfig c;
  c.vocab_size = 37;
  c.context_length = 24;
  c.d_model = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 32;
  c.dtype = dtype;
  return c;
}

// A model drawn from `seed` on `device`: the same seed gives the same weights on every device.
std::unique_ptr<nn::TransformerLM> seeded_model(DType dtype, Device device, uint64_t seed = 11) {
  Generator gen(seed);
  auto model = std::make_unique<nn::TransformerLM>(tiny_config(dtype), &gen);
  model->to(device);
  return model;
}

// Two models with the same weights, the second on cuda:0.
struct TwinModels {
  std::unique_ptr<nn::TransformerLM> cpu_model = nullptr, gpu_model = nullptr;
  nn::TransformerLM &cpu, &gpu;
  explicit TwinModels(DType dtype)
      : cpu_model(seeded_model(dtype, Device::cpu())),
        gpu_model(seeded_model(dtype, cuda_test::gpu())),
        cpu(*cpu_model),
        gpu(*gpu_model) {}
};

}  // namespace

TEST_CASE("generate: greedy on cuda:0 gives the CPU's tokens", "[cuda][generate]") {
  for (DType dtype : {kFloat32, kFloat64}) {
    INFO(dtype_name(dtype));
    TwinModels m(dtype);
    REQUIRE(m.gpu.device() == gpu());
    const std::vector<uint32_t> prompt{3, 1, 4, 1, 5};
    lm::GenerateOptions o;
    o.sampling.greedy = true;
    o.max_tokens = 24 - int64_t(prompt.size()) + 1;  // fills the context exactly
    const lm::GenerateResult want = lm::generate(m.cpu, prompt, o);
    const lm::GenerateResult got = lm::generate(m.gpu, prompt, o);
    CHECK(got.tokens == want.tokens);
    CHECK(got.tokens.size() == size_t(o.max_tokens));
    // Past the context with --sliding: the re-prefills run on the device too.
    o.sliding = true;
    o.max_tokens = 40;
    CHECK(lm::generate(m.gpu, prompt, o).tokens == lm::generate(m.cpu, prompt, o).tokens);
  }
}

TEST_CASE("generate: sampling on cuda:0 gives the CPU's tokens for the same seed", "[cuda][generate]") {
  TwinModels m(kFloat32);
  const std::vector<uint32_t> prompt{7, 2};
  lm::GenerateOptions o;
  o.max_tokens = 20;
  o.seed = 1234;
  o.sampling.temperature = 1.5;  // flat: many different tokens, so a wrong draw would show
  for (auto [k, p] : {std::pair<int64_t, double>{0, 1.0}, {5, 1.0}, {0, 0.9}}) {
    o.sampling.top_k = k;
    o.sampling.top_p = p;
    INFO("top_k " << k << " top_p " << p);
    const auto want = lm::generate(m.cpu, prompt, o).tokens;
    CHECK(lm::generate(m.gpu, prompt, o).tokens == want);
    o.seed += 1;  // another seed gives other tokens (the check above can fail)
    CHECK(lm::generate(m.gpu, prompt, o).tokens != want);
    o.seed -= 1;
  }
}

TEST_CASE("generate: the KV cache lives on cuda:0 and a cached forward there gives the CPU's logits",
          "[cuda][generate]") {
  TwinModels m(kFloat32);
  nn::KVCache cpu_cache(m.cpu.config, 1), gpu_cache(m.gpu.config, 1, 0, gpu());
  for (size_t l = 0; l < gpu_cache.num_layers(); ++l) {
    CHECK(gpu_cache.layer(l).k.device() == gpu());
    CHECK(gpu_cache.layer(l).v.device() == gpu());
  }
  const Tensor prompt = from_vector(std::vector<int64_t>{5, 9, 2, 6}, {1, 4});
  const Tensor next = from_vector(std::vector<int64_t>{8}, {1, 1});
  expect_close(m.cpu.forward(prompt, cpu_cache), m.gpu.forward(prompt.to(gpu()), gpu_cache), 1e-4, 1e-5, "prefill");
  const Tensor got = m.gpu.forward(next.to(gpu()), gpu_cache);
  CHECK(got.device() == gpu());
  expect_close(m.cpu.forward(next, cpu_cache), got, 1e-4, 1e-5, "decode");
  CHECK(gpu_cache.length() == 5);
  expect_close(cpu_cache.layer(1).k.narrow(2, 0, 5), gpu_cache.layer(1).k.narrow(2, 0, 5), 1e-4, 1e-5, "cached keys");
}

TEST_CASE("generate: next_token on cuda:0 logits is the argmax, lowest id among ties, NaN is refused",
          "[cuda][generate]") {
  lm::SamplerOptions greedy;
  greedy.greedy = true;
  lm::Sampler sampler(greedy, 0);
  const Tensor logits = from_vector(std::vector<float>{0.5f, 3.f, -1.f, 3.f, 2.f, 9.f, 9.f, 1.f}, {1, 2, 4});
  CHECK(lm::next_token(sampler, logits.to(gpu())) == 1);  // the last position: {2, 9, 9, 1} → id 1
  CHECK(lm::next_token(sampler, logits.narrow(1, 0, 1).to(gpu())) == 1);  // {0.5, 3, -1, 3} → id 1
  CHECK(lm::next_token(sampler, logits.to(kBFloat16).to(gpu())) == 1);    // bf16 logits (exact here)
  CHECK(lm::next_token(sampler, logits.to(kFloat64).to(gpu())) == 1);
  const Tensor bad = from_vector(std::vector<float>{1.f, std::nanf(""), 2.f}, {1, 1, 3});
  CHECK_THROWS_WITH(lm::next_token(sampler, bad.to(gpu())), Catch::Contains("NaN"));
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor all_minus_inf = from_vector(std::vector<float>{-inf, -inf}, {1, 1, 2});
  CHECK_THROWS_WITH(lm::next_token(sampler, all_minus_inf.to(gpu())), Catch::Contains("-inf"));
}

TEST_CASE("evaluate: the loss on cuda:0 is the CPU's within float32 tolerance", "[cuda][generate]") {
  TwinModels m(kFloat32);
  std::vector<uint32_t> ids;
  Generator gen(3);
  for (int i = 0; i < 24 * 5 + 7; ++i) ids.push_back(uint32_t(gen.next_u64() % 37));
  const data::TokenSource source(std::span<const uint32_t>{ids});
  const lm::EvalResult want = lm::evaluate(m.cpu, source, 2);
  const lm::EvalResult got = lm::evaluate(m.gpu, source, 2);
  CHECK(got.tokens == want.tokens);
  CHECK(got.windows == want.windows);
  CHECK(std::abs(got.loss - want.loss) <= 1e-5 * want.loss);
  CHECK(got.loss > 3.0);  // a random model: about ln 37 ≈ 3.6
}

TEST_CASE("chat: a session on cuda:0 holds the CPU's greedy conversation, old turns dropped alike",
          "[cuda][generate]") {
  testing::LetterCodec codec;
  const auto cpu_model = testing::chat_model(32, 5, kFloat32);
  const auto gpu_model = testing::chat_model(32, 5, kFloat32);
  gpu_model->to(gpu());
  lm::ChatOptions o;
  o.sampling.greedy = true;
  o.max_tokens = 6;
  o.system = "ab";
  lm::ChatSession on_cpu(*cpu_model, codec, codec.chat, o), on_gpu(*gpu_model, codec, codec.chat, o);
  int64_t dropped = 0;
  for (const std::string user : {"abc", "ponm", "aaaa", "b", "cde", "fgh"}) {
    const lm::ChatReply want = on_cpu.reply(user), got = on_gpu.reply(user);
    CHECK(got.tokens == want.tokens);
    CHECK(got.text == want.text);
    CHECK(got.dropped_turns == want.dropped_turns);
    dropped += got.dropped_turns;
    CHECK(on_gpu.history() == on_cpu.history());
    CHECK(on_gpu.cache_length() == int64_t(on_gpu.history().size()));
  }
  CHECK(dropped > 0);  // the context of 32 was outgrown: the re-prefill ran on the device too
}

TEST_CASE("chat: on cuda:0 graph replays give eager decoding's conversation, sampled draw for draw",
          "[cuda][generate]") {
  testing::LetterCodec codec;
  const auto model = testing::chat_model(32, 5, kFloat32);
  model->to(gpu());
  for (const bool greedy : {false, true}) {
    CAPTURE(greedy);
    lm::ChatOptions o;
    o.sampling.greedy = greedy;
    o.sampling.temperature = 1.5;  // sampled: a flat distribution, so a draw out of step would show
    o.max_tokens = 5;
    o.seed = 7;
    o.stop = {"q"};
    lm::ChatOptions eager_options = o;
    eager_options.cuda_graph = false;
    lm::ChatSession graph(*model, codec, codec.chat, o), eager(*model, codec, codec.chat, eager_options);
    int64_t dropped = 0, graph_steps = 0;
    std::set<lm::ChatStop> stops;
    for (const std::string user : {"abc", "ponm", "aaaa", "b", "cde", "fgh", "ij", "klm"}) {
      const lm::ChatReply want = eager.reply(user), got = graph.reply(user);
      CHECK(got.tokens == want.tokens);
      CHECK(got.text == want.text);
      CHECK(got.stop == want.stop);
      CHECK(got.dropped_turns == want.dropped_turns);
      CHECK(want.graph_steps == 0);
      CHECK(got.graph_steps == got.decode_tokens);  // every decode step a replay
      dropped += got.dropped_turns, graph_steps += got.graph_steps;
      stops.insert(got.stop);
      CHECK(graph.history() == eager.history());
    }
    CHECK(dropped > 0);  // re-prefills between replays
    CHECK(graph_steps > 0);
    if (!greedy) CHECK(stops.size() >= 2);  // the turns end in more than one way (token limit, stop string, end)
  }
}
