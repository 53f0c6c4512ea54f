// generate.cpp — prefill, then decode one token at a time through the KV cache (see generate.h).
#include "lm/generate.h"

#include <chrono>
#include <optional>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "lm/graph_decoder.h"
#include "nn/kv_cache.h"
#include "nn/precision.h"

namespace tapegrad::lm {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }


}  // namespace

uint32_t next_token(Sampler& sampler, const Tensor& logits) {
  TG_CHECK(logits.dim() == 3 && logits.size(0) == 1 && logits.size(1) >= 1,
           "next_token: logits must be [1, T, V] with T >= 1, but are {}", logits.shape());
  const Tensor row = logits.select(1, logits.size(1) - 1).select(0, 0);  // [V]
  if (row.device() != Device::cpu()) {
    // Drawn where the logits are (sample_token: lm::Sampler's rules, with this sampler's next uniform), as the
    // decode graph draws (lm/graph_decoder.h): {id, status} comes back in one read instead of the [V] row.
    const SamplerOptions& o = sampler.options();
    const Generator::State before = sampler.state();
    const Options on_device = Options(kFloat64).device(row.device());
    const Tensor u = o.is_greedy() ? Tensor() : tensor({sampler.next_uniform()}, on_device);
    const std::vector<double> read = sample_token(row, u, o.on_device()).to_vector<double>();
    try {
      return drawn_token_id(read[0], read[1]);
    } catch (const Error&) {
      sampler.set_state(before);  // as the host Sampler: a refused row draws nothing
      throw;
    }
  }
  const Tensor r = row.contiguous();
  const auto n = static_cast<size_t>(r.numel());
  if (r.dtype() == kFloat64) return sampler.sample(std::span<const double>(r.data<double>(), n));
  const Tensor f = r.dtype() == kFloat32 ? r : r.to(kFloat32);
  return sampler.sample(std::span<const float>(f.data<float>(), n));
}

Tensor ids_as_batch(std::span<const uint32_t> ids, Device device) {
  std::vector<int64_t> v(ids.begin(), ids.end());
  return from_vector(v, {1, static_cast<int64_t>(v.size())}).to(device);
}

void check_generate_request(const nn::TransformerLM& model, std::span<const uint32_t> prompt,
                            const GenerateOptions& o) {
  const int64_t context = model.config.context_length, vocab = model.config.vocab_size;
  TG_CHECK(!prompt.empty(), "generate: the prompt is empty (it needs at least one token)");
  for (size_t i = 0; i < prompt.size(); ++i)
    TG_CHECK(prompt[i] < uint64_t(vocab), "generate: prompt token {} (position {}) is outside the model's vocabulary of {}",
             prompt[i], i, vocab);
  TG_CHECK(o.max_tokens >= 1, "generate: --max-tokens must be at least 1, but is {}", o.max_tokens);
  o.sampling.validate();
  // Positions needed: the prompt and every generated token except the last, which is never fed back.
  const int64_t needed = int64_t(prompt.size()) + o.max_tokens - 1;
  TG_CHECK(o.sliding || needed <= context,
           "generate: the prompt ({} tokens) and --max-tokens {} need {} positions, more than the model's context of "
           "{} (without --no-sliding it slides past the context; or a shorter prompt, fewer tokens)",
           prompt.size(), o.max_tokens, needed, context);
}

GenerateResult generate(const nn::TransformerLM& model, std::span<const uint32_t> prompt, const GenerateOptions& o,
                        const std::function<void(uint32_t)>& on_token) {
  check_generate_request(model, prompt, o);
  const int64_t context = model.config.context_length;
  NoGradGuard no_grad;
  nn::CastCacheGuard cast_cache;  // bf16 copies of the weights kept between decode steps (nn/precision.h)
  Sampler sampler(o.sampling, o.seed);
  const Device device = model.device();
  nn::KVCache cache(model.config, 1, 0, device);
  GenerateResult r;
  r.prompt_tokens = int64_t(prompt.size());
  std::vector<uint32_t> all(prompt.begin(), prompt.end());  // prompt + generated: what a re-prefill re-reads
  // With `sliding`, a prompt longer than the context is cut to its last `context` tokens.
  const size_t first = o.sliding && int64_t(all.size()) > context ? all.size() - size_t(context) : 0;
  if (first > 0) r.slid_tokens = 1;

  r.prefill_tokens = int64_t(all.size() - first);
  auto t0 = Clock::now();
  Tensor logits = model.forward(ids_as_batch(std::span(all).subspan(first), device), cache, /*last_only=*/true);
  uint32_t next = next_token(sampler, logits);
  r.prefill_seconds = seconds_since(t0);
  // Decode steps as graph replays where the device can capture (a GPU); eager launches otherwise.
  std::optional<GraphDecoder> graph;
  if (o.cuda_graph && device.type == DeviceType::CUDA) graph.emplace(model, cache, o.sampling.is_greedy());
  t0 = Clock::now();
  for (int64_t n = 0;; ++n) {
    r.tokens.push_back(next);
    all.push_back(next);
    if (on_token) on_token(next);
    if (o.stop_token && next == *o.stop_token) {
      r.stopped_at_stop_token = true;
      break;
    }
    if (n + 1 == o.max_tokens) break;
    if (cache.length() == cache.capacity()) {  // only with `sliding`: re-read the last `context` tokens
      cache.reset();
      logits = model.forward(ids_as_batch(std::span(all).last(size_t(context)), device), cache, /*last_only=*/true);
      next = next_token(sampler, logits);
      ++r.slid_tokens;
    } else if (graph && graph->available()) {
      next = graph->step(next, sampler, o.max_tokens - n - 1);  // greedy: up to that many replays per read
    } else {
      const uint32_t id[1] = {next};
      next = next_token(sampler, model.forward(ids_as_batch(id, device), cache));
    }
    ++r.decode_tokens;
  }
  r.decode_seconds = seconds_since(t0);
  r.graph_steps = graph ? graph->steps() : 0;
  return r;
}

}  // namespace tapegrad::lm
