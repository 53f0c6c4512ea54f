// test_cuda_graph_decode.cpp — generation on cuda:0 with each decode step replayed as a CUDA graph
// (lm/graph_decoder.h), against eager decoding on the same device and against the CPU:
//  * one captured TransformerLM::forward_decode, replayed at position after position with new tokens, gives the
//    eager forward(token, cache)'s logits and cache bit for bit (float32, float64, bf16 precision);
//  * lm::generate with cuda_graph on gives the tokens of cuda_graph off (and of the CPU where its arithmetic
//    is the GPU's), greedy and sampled with a seed, past the context with `sliding` (re-prefills between replays),
//    with a stop token; every decode step but the re-prefills is a replay;
//  * greedy graph steps are queued kLookahead at a time and read once (ids and logits), giving the tokens of
//    one replay per read, bounded by the request and the cache; a NaN logit is still refused;
//  * sampled graph steps draw on the device with uniforms the host Sampler drew: eager decoding's tokens, one read
//    per kLookahead tokens, the Sampler's state after each token that of the host drawing it.
#include <limits>
#include <memory>

#include "kernels/device_graph.h"
#include "lm/generate.h"
#include "lm/graph_decoder.h"
#include "nn/kv_cache.h"
#include "nn/precision.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/same_bits.h"
#include "tests/tiny_lm_config.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;
using testing::same_bits;

namespace {

std::unique_ptr<nn::TransformerLM> seeded_model(DType dtype, Device device, uint64_t seed = 11) {
  Generator gen(seed);
  auto model = std::make_unique<nn::TransformerLM>(testing::tiny_gqa_lm(dtype), &gen);
  model->to(device);
  return model;
}

// The prompt {1, 2} read into `cache`.
void prefill_1_2(const nn::TransformerLM& model, nn::KVCache& cache) {
  NoGradGuard no_grad;
  model.forward(from_vector(std::vector<int64_t>{1, 2}, {1, 2}).to(gpu()), cache, true);
}

lm::GenerateResult run(const nn::TransformerLM& model, const std::vector<uint32_t>& prompt, lm::GenerateOptions o,
                       bool graph) {
  o.cuda_graph = graph;
  return lm::generate(model, prompt, o);
}

}  // namespace

TEST_CASE("graph decode: one captured forward_decode replayed per position gives the eager logits and cache",
          "[cuda][decode_graph]") {
  for (auto [dtype, bf16] : {std::pair{kFloat32, false}, {kFloat64, false}, {kFloat32, true}}) {
    INFO(dtype_name(dtype) << (bf16 ? " under bf16 precision" : ""));
    nn::PrecisionGuard precision(bf16 ? nn::Precision::BF16 : nn::Precision::FP32);
    nn::CastCacheGuard cast_cache;
    NoGradGuard no_grad;
    const auto model = seeded_model(dtype, gpu());
    nn::KVCache eager(model->config, 1, 0, gpu()), replayed(model->config, 1, 0, gpu());
    const Tensor prompt = from_vector(std::vector<int64_t>{3, 9, 27}, {1, 3}).to(gpu());
    CHECK(same_bits(model->forward(prompt, eager, true), model->forward(prompt, replayed, true)));
    const Options ints = Options(kInt64).device(gpu());
    Tensor token = zeros({1, 1}, ints), position = zeros({1}, ints);
    Tensor logits;
    std::unique_ptr<kernels::DeviceGraph> graph = kernels::capture_device_work(
        kernels::backend(gpu()), [&] { logits = model->forward_decode(token, replayed, position); });
    REQUIRE(graph != nullptr);
    for (int64_t id : {5, 60, 0, 33, 12, 63, 7}) {
      INFO("position " << replayed.length());
      token.fill_(double(id));
      position.fill_(double(replayed.length()));
      graph->replay();
      replayed.advance(1);
      const Tensor want = model->forward(from_vector(std::vector<int64_t>{id}, {1, 1}).to(gpu()), eager);
      CHECK(same_bits(logits, want));
    }
    for (size_t l = 0; l < eager.num_layers(); ++l) {
      CHECK(same_bits(replayed.layer(l).k, eager.layer(l).k));
      CHECK(same_bits(replayed.layer(l).v, eager.layer(l).v));
    }
  }
}

TEST_CASE("graph decode: generate replays every decode step and gives eager decoding's tokens",
          "[cuda][decode_graph]") {
  const auto gpu_model = seeded_model(kFloat32, gpu());
  const auto cpu_model = seeded_model(kFloat32, Device::cpu());
  const std::vector<uint32_t> prompt{3, 1, 4, 1, 5};
  lm::GenerateOptions o;
  o.sampling.greedy = true;
  o.max_tokens = 16 - int64_t(prompt.size()) + 1;  // fills the context exactly
  const lm::GenerateResult graph = run(*gpu_model, prompt, o, true), eager = run(*gpu_model, prompt, o, false);
  CHECK(graph.tokens == eager.tokens);
  CHECK(graph.tokens == lm::generate(*cpu_model, prompt, o).tokens);
  CHECK(graph.graph_steps == graph.decode_tokens);
  CHECK(graph.decode_tokens == o.max_tokens - 1);
  CHECK(eager.graph_steps == 0);
  CHECK(lm::generate(*cpu_model, prompt, o).graph_steps == 0);  // the CPU cannot capture: eager

  SECTION("past the context with sliding: re-prefills between replays") {
    o.sliding = true;
    o.max_tokens = 40;
    const lm::GenerateResult g = run(*gpu_model, prompt, o, true);
    CHECK(g.tokens == run(*gpu_model, prompt, o, false).tokens);
    CHECK(g.tokens == lm::generate(*cpu_model, prompt, o).tokens);
    CHECK(g.graph_steps > 0);
    CHECK(g.graph_steps < g.decode_tokens);  // the re-prefills are eager
  }
  SECTION("sampled with a seed: drawn on the device with the host's uniforms, the CPU's tokens") {
    o.sampling.greedy = false;
    o.sampling.temperature = 1.5;
    o.sampling.top_k = 20;
    o.seed = 77;
    const lm::GenerateResult g = run(*gpu_model, prompt, o, true);
    CHECK(g.tokens == run(*gpu_model, prompt, o, false).tokens);
    CHECK(g.tokens == lm::generate(*cpu_model, prompt, o).tokens);
    CHECK(g.graph_steps == g.decode_tokens);
    o.seed = 78;  // another seed, other tokens: the comparison above can fail
    CHECK(run(*gpu_model, prompt, o, true).tokens != g.tokens);
  }
  SECTION("a stop token ends it") {
    const uint32_t stop = eager.tokens[3];
    o.stop_token = stop;
    const lm::GenerateResult g = run(*gpu_model, prompt, o, true);
    CHECK(g.stopped_at_stop_token);
    CHECK(g.tokens == run(*gpu_model, prompt, o, false).tokens);
    CHECK(g.tokens.back() == stop);
  }
}

TEST_CASE("graph decode: bf16 precision and float64 give eager decoding's tokens", "[cuda][decode_graph]") {
  const std::vector<uint32_t> prompt{8, 2, 19};
  lm::GenerateOptions o;
  o.sampling.greedy = true;
  o.max_tokens = 12;
  {
    const auto model = seeded_model(kFloat64, gpu());
    const lm::GenerateResult g = run(*model, prompt, o, true);
    CHECK(g.tokens == run(*model, prompt, o, false).tokens);
    CHECK(g.graph_steps == 11);
  }
  {
    const auto model = seeded_model(kFloat32, gpu());
    nn::PrecisionGuard precision(nn::Precision::BF16);
    const lm::GenerateResult g = run(*model, prompt, o, true);
    CHECK(g.tokens == run(*model, prompt, o, false).tokens);
    CHECK(g.graph_steps == 11);
  }
}

TEST_CASE("graph decode: greedy steps are replayed kLookahead at a time with one read, and a NaN logit is refused",
          "[cuda][decode_graph]") {
  const auto model = seeded_model(kFloat32, gpu());
  lm::SamplerOptions greedy;
  greedy.greedy = true;
  lm::Sampler sampler(greedy, 0);
  nn::CastCacheGuard cast_cache;
  // The reference: the same chain one replay per read (ahead = 1, the behaviour without lookahead).
  nn::KVCache cache1(model->config, 1, 0, gpu());
  prefill_1_2(*model, cache1);
  lm::GraphDecoder one(*model, cache1, /*greedy=*/true);
  std::vector<uint32_t> want{one.step(4, sampler)};
  for (int i = 0; i < 11; ++i) {
    const uint64_t syncs = kernels::cuda::sync_count();
    want.push_back(one.step(want.back(), sampler));
    CHECK(kernels::cuda::sync_count() - syncs == 1);
  }
  CHECK(one.replays() == 12);

  nn::KVCache cache(model->config, 1, 0, gpu());
  prefill_1_2(*model, cache);
  lm::GraphDecoder decoder(*model, cache, /*greedy=*/true);
  REQUIRE(decoder.available());
  constexpr int64_t K = lm::GraphDecoder::kLookahead;
  std::vector<uint32_t> got;
  uint64_t syncs = kernels::cuda::sync_count();
  got.push_back(decoder.step(4, sampler, /*ahead=*/12));  // captures, replays K steps, reads them once
  CHECK(kernels::cuda::sync_count() - syncs == 1);
  CHECK(decoder.replays() == K);
  CHECK(cache.length() == 3);  // one token served: the cache counts what the caller has
  syncs = kernels::cuda::sync_count();
  for (int64_t i = 1; i < K; ++i) got.push_back(decoder.step(got.back(), sampler, 12 - i));  // from the batch
  CHECK(kernels::cuda::sync_count() - syncs == 0);
  CHECK(decoder.replays() == K);
  got.push_back(decoder.step(got.back(), sampler, 12 - K));  // the next batch: only the 4 tokens still asked for
  CHECK(decoder.replays() == 12);
  for (int64_t i = K + 1; i < 12; ++i) got.push_back(decoder.step(got.back(), sampler, 12 - i));
  CHECK(decoder.replays() == 12);
  CHECK(decoder.steps() == 12);
  CHECK(got == want);
  CHECK(cache.length() == 14);
  // Another token than the one served (the caller's choice): a new batch from it, at the current position,
  // bounded by the cache's end (context 16: 2 positions left), not by `ahead`.
  const uint32_t other = (got.back() + 1) % uint32_t(model->config.vocab_size);
  const uint32_t t = decoder.step(other, sampler, 100);
  CHECK(decoder.replays() == 14);
  CHECK(t == one.step(other, sampler));
  CHECK(decoder.step(t, sampler, 100) == one.step(t, sampler));  // the batch's second token: no replay
  CHECK(decoder.replays() == 14);
  CHECK(cache.length() == cache.capacity());
  CHECK_THROWS_WITH(decoder.step(t, sampler, 100), Catch::Contains("does not fit"));
  // NaN weights in the final norm: the argmax lands on NaN, and its logit says so.
  nn::KVCache cache2(model->config, 1, 0, gpu());
  prefill_1_2(*model, cache2);
  lm::GraphDecoder nan_decoder(*model, cache2, /*greedy=*/true);
  {
    NoGradGuard no_grad;
    for (auto& [name, p] : model->named_parameters())
      if (name.find("ln_final") != std::string::npos) p.fill_(std::numeric_limits<double>::quiet_NaN());
  }
  CHECK_THROWS_WITH(nan_decoder.step(4, sampler, 5), Catch::Contains("NaN"));
}

TEST_CASE("graph decode: sampled steps are drawn on the device kLookahead at a time, the sampler's stream kept",
          "[cuda][decode_graph]") {
  const auto model = seeded_model(kFloat32, gpu());
  lm::SamplerOptions o;
  o.temperature = 1.4;
  o.top_k = 30;
  o.top_p = 0.95;
  nn::CastCacheGuard cast_cache;
  // The reference: eager steps on the device, the host Sampler drawing from each row of logits.
  nn::KVCache eager_cache(model->config, 1, 0, gpu());
  prefill_1_2(*model, eager_cache);
  lm::Sampler eager_sampler(o, 21);
  std::vector<uint32_t> want;
  std::vector<Generator::State> want_states;
  uint32_t id = 4;
  for (int i = 0; i < 12; ++i) {
    NoGradGuard no_grad;
    const std::vector<float> row =
        model->forward(from_vector(std::vector<int64_t>{id}, {1, 1}).to(gpu()), eager_cache).to_vector<float>();
    want.push_back(id = eager_sampler.sample(std::span<const float>(row)));
    want_states.push_back(eager_sampler.state());
  }

  nn::KVCache cache(model->config, 1, 0, gpu());
  prefill_1_2(*model, cache);
  lm::Sampler sampler(o, 21);
  lm::GraphDecoder decoder(*model, cache, /*greedy=*/false);
  REQUIRE(decoder.available());
  constexpr int64_t K = lm::GraphDecoder::kLookahead;
  std::vector<uint32_t> got;
  uint64_t syncs = kernels::cuda::sync_count();
  got.push_back(decoder.step(4, sampler, /*ahead=*/12));  // K uniforms drawn, K replays, one read
  CHECK(kernels::cuda::sync_count() - syncs == 1);
  CHECK(decoder.replays() == K);
  CHECK(sampler.state() == want_states[0]);  // as if the host had drawn one token
  syncs = kernels::cuda::sync_count();
  for (int64_t i = 1; i < K; ++i) {
    got.push_back(decoder.step(got.back(), sampler, 12 - i));
    CHECK(sampler.state() == want_states[size_t(i)]);
  }
  CHECK(kernels::cuda::sync_count() - syncs == 0);
  for (int64_t i = K; i < 12; ++i) got.push_back(decoder.step(got.back(), sampler, 12 - i));
  CHECK(decoder.replays() == 12);
  CHECK(got == want);
  CHECK(sampler.state() == want_states.back());
  // The captured options stay: another sampler's options are refused, not silently ignored.
  lm::SamplerOptions other = o;
  other.top_k = 5;
  lm::Sampler other_sampler(other, 1);
  CHECK_THROWS_WITH(decoder.step(1, other_sampler, 1), Catch::Contains("options changed"));
  // A sampler moved on by the caller (e.g. chat putting back an unused draw) does not continue the batch: the
  // next step draws from the sampler's state as it is now. (Context 16: 2 positions left.)
  const uint32_t first = decoder.step(got.back(), sampler, 3);  // a batch of 2, bounded by the cache
  const Generator::State after_first = sampler.state();
  CHECK(decoder.replays() == 14);
  sampler.set_state(want_states.back());  // the draw of `first` taken back
  decoder.step(first, sampler, 1);        // not served from the batch: a new one at the next position
  CHECK(decoder.replays() == 15);
  CHECK(sampler.state() == after_first);  // the same uniform drawn again
}

TEST_CASE("graph decode: the CPU has no graph decoder", "[cuda][decode_graph]") {
  const auto model = seeded_model(kFloat32, Device::cpu());
  nn::KVCache cache(model->config, 1);
  lm::GraphDecoder decoder(*model, cache, true);
  CHECK_FALSE(decoder.available());
}
