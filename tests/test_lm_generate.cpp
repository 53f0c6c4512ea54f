// test_lm_generate.cpp — lm::generate: greedy generation through the KV cache picks the argmax of
// repeated full forwards; the same seed gives the same tokens; the stop token ends it; by default it slides
// past the context (and then matches full forwards over the last `context` tokens, as nanoGPT crops); every
// request that cannot run (past the context only with sliding off) is refused before anything runs.
#include <catch2/catch.hpp>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "lm/generate.h"

using namespace tapegrad;

namespace {

nn::TransformerLMConfig config() {
  nn::TransformerLMConfig c;
  c.vocab_size = 29;
  c.context_length = 12;
  c.d_model = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 32;
  c.dtype = kFloat64;
  return c;
}

// The greedy continuation by full forwards over (at most) the last `window` tokens.
std::vector<uint32_t> greedy_by_full_forwards(const nn::TransformerLM& lm, std::vector<uint32_t> seq, int64_t n,
                                              size_t window) {
  NoGradGuard no_grad;
  std::vector<uint32_t> out;
  for (int64_t i = 0; i < n; ++i) {
    const size_t first = seq.size() > window ? seq.size() - window : 0;
    std::vector<int64_t> ids(seq.begin() + long(first), seq.end());
    const Tensor logits = lm.forward(from_vector(ids, {1, int64_t(ids.size())}));
    const auto next = uint32_t(argmax(logits.select(1, logits.size(1) - 1), -1).item<int64_t>());
    out.push_back(next);
    seq.push_back(next);
  }
  return out;
}

}  // namespace

TEST_CASE("generate: greedy through the KV cache equals greedy by full forwards", "[lm][generate]") {
  Generator gen(5);
  nn::TransformerLM lm(config(), &gen);
  for (std::vector<uint32_t> prompt : {std::vector<uint32_t>{3}, std::vector<uint32_t>{1, 4, 1, 5, 9}}) {
    lm::GenerateOptions o;
    o.sampling.greedy = true;
    o.max_tokens = 12 - int64_t(prompt.size()) + 1;  // exactly fills the context
    std::vector<uint32_t> streamed;
    const lm::GenerateResult r = lm::generate(lm, prompt, o, [&](uint32_t id) { streamed.push_back(id); });
    CHECK(r.tokens == greedy_by_full_forwards(lm, prompt, o.max_tokens, 12));
    CHECK(streamed == r.tokens);
    CHECK(r.prompt_tokens == int64_t(prompt.size()));
    CHECK(r.decode_tokens == o.max_tokens - 1);
    // temperature 0 is greedy too
    o.sampling.greedy = false;
    o.sampling.temperature = 0;
    CHECK(lm::generate(lm, prompt, o).tokens == r.tokens);
  }
}

TEST_CASE("generate: seeds, the stop token, sliding past the context", "[lm][generate]") {
  Generator gen(6);
  nn::TransformerLM lm(config(), &gen);
  const std::vector<uint32_t> prompt{2, 7, 1};
  lm::GenerateOptions o;
  o.max_tokens = 10;
  o.sampling.temperature = 1.5;  // flat enough that different seeds differ
  o.seed = 42;
  const auto a = lm::generate(lm, prompt, o).tokens, b = lm::generate(lm, prompt, o).tokens;
  CHECK(a == b);
  o.seed = 43;
  CHECK(lm::generate(lm, prompt, o).tokens != a);

  // Stop at the first occurrence of a token the seed-42 run produces.
  o.seed = 42;
  o.stop_token = a[4];
  const size_t at = size_t(std::find(a.begin(), a.end(), a[4]) - a.begin());
  const lm::GenerateResult stopped = lm::generate(lm, prompt, o);
  CHECK(stopped.stopped_at_stop_token);
  CHECK(stopped.tokens == std::vector<uint32_t>(a.begin(), a.begin() + long(at) + 1));
  o.stop_token.reset();

  // Sliding, the default: 30 tokens from a context of 12; after the cache fills, each token is the greedy
  // pick over the last 12 tokens (nanoGPT's crop). Sliding off: refused, naming the flag that turns it off.
  o.sampling = lm::SamplerOptions{};
  o.sampling.greedy = true;
  o.max_tokens = 30;
  const lm::GenerateResult slid = lm::generate(lm, prompt, o);
  REQUIRE(slid.tokens.size() == 30);
  std::vector<uint32_t> expected = greedy_by_full_forwards(lm, prompt, 10, 12);  // while it fits: the whole prefix
  std::vector<uint32_t> seq = prompt;
  seq.insert(seq.end(), expected.begin(), expected.end());
  const auto rest = greedy_by_full_forwards(lm, seq, 20, 12);
  expected.insert(expected.end(), rest.begin(), rest.end());
  CHECK(slid.tokens == expected);
  CHECK(slid.slid_tokens == 20);  // the first 10 fit: through the KV cache
  o.max_tokens = 10;
  CHECK(lm::generate(lm, prompt, o).slid_tokens == 0);
  o.max_tokens = 30;
  o.sliding = false;
  CHECK_THROWS_WITH(lm::generate(lm, prompt, o), Catch::Contains("more than the model's context of 12") &&
                                                     Catch::Contains("--no-sliding"));
}

TEST_CASE("generate: requests that cannot run are refused before anything runs", "[lm][generate]") {
  Generator gen(7);
  nn::TransformerLM lm(config(), &gen);
  lm::GenerateOptions o;
  CHECK_THROWS_WITH(lm::generate(lm, std::vector<uint32_t>{}, o), Catch::Contains("prompt is empty"));
  CHECK_THROWS_WITH(lm::generate(lm, std::vector<uint32_t>{1, 29}, o),
                    Catch::Contains("prompt token 29 (position 1) is outside the model's vocabulary of 29"));
  o.max_tokens = 0;
  CHECK_THROWS_WITH(lm::generate(lm, std::vector<uint32_t>{1}, o), Catch::Contains("--max-tokens"));
  o.max_tokens = 5;
  o.sliding = false;
  o.sampling.top_p = 0;
  CHECK_THROWS_WITH(lm::generate(lm, std::vector<uint32_t>{1}, o), Catch::Contains("--top-p"));
  o.sampling.top_p = 1;
  o.sampling.temperature = -1;
  CHECK_THROWS_WITH(lm::generate(lm, std::vector<uint32_t>{1}, o), Catch::Contains("--temperature"));
  o.sampling.temperature = 1;
  o.sampling.top_k = -2;
  CHECK_THROWS_WITH(lm::generate(lm, std::vector<uint32_t>{1}, o), Catch::Contains("--top-k"));
  // A prompt longer than the context: refused without sliding, cut to its last 12 tokens with it.
  o.sampling.top_k = 0;
  const std::vector<uint32_t> long_prompt(20, 3);
  CHECK_THROWS(lm::generate(lm, long_prompt, o));
  o.sliding = true;
  o.sampling.greedy = true;
  const lm::GenerateResult cut = lm::generate(lm, long_prompt, o);
  CHECK(cut.tokens == greedy_by_full_forwards(lm, long_prompt, 5, 12));
  CHECK(cut.prompt_tokens == 20);
  CHECK(cut.prefill_tokens == 12);
  CHECK(cut.slid_tokens == 5);
}
