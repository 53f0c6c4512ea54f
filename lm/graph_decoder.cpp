// graph_decoder.cpp — one decode step captured as a device graph and replayed per token (see graph_decoder.h).
#include "lm/graph_decoder.h"

#include <algorithm>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/backend.h"
#include "kernels/error.h"

namespace tapegrad::lm {

GraphDecoder::GraphDecoder(const nn::TransformerLM& model, nn::KVCache& cache, bool greedy)
    : model_(model), cache_(cache), greedy_(greedy) {
  const Device device = model.device();
  // A CUDA device (a GPU, or the emulated one in CI) captures; the CPU runs its work at once and cannot.
  available_ = device.type == DeviceType::CUDA && cache.batch() == 1;
  if (!available_) return;
  const Options ints = Options(kInt64).device(device);
  token_ = zeros({1, 1}, ints);
  position_ = zeros({1}, ints);
  one_ = ones({1}, ints);
  ring_ = zeros({kLookahead, 2}, Options(kFloat64).device(device));
  slot_ = zeros({1}, ints);
  if (!greedy) uniforms_ = zeros({kLookahead}, Options(kFloat64).device(device));
}

GraphDecoder::~GraphDecoder() = default;

void GraphDecoder::capture(const SamplerOptions& options) {
  kernels::Backend& backend = kernels::backend(model_.device());
  const int64_t V = model_.config.vocab_size;
  const TokenSampling sampling = options.on_device();
  try {
    graph_ = kernels::capture_device_work(backend, [&] {
      NoGradGuard no_grad;
      const Tensor row = model_.forward_decode(token_, cache_, position_).reshape({V});  // [V]
      const Tensor u = greedy_ ? Tensor() : index_select(uniforms_, 0, slot_);           // this replay's uniform
      const Tensor pair = sample_token(row, u, sampling, token_.view({1}));              // {id, status}; token = id
      index_copy_(ring_, 0, slot_, pair.view({1, 2}));  // ring row `slot`, then the next row
      slot_.add_(one_);
      position_.add_(one_);
    });
  } catch (const Error& e) {
    throw Error(fmt::format("generate: a decode step on {} cannot be captured as a CUDA graph (--cuda-graph off "
                            "decodes without one): {}",
                            model_.device().str(), e.what()));
  }
  TG_CHECK(graph_ != nullptr, "generate: the backend of {} cannot capture CUDA graphs", model_.device().str());
  captured_ = options;
}

bool GraphDecoder::continues_batch(uint32_t id, const Sampler& sampler) const {
  return batch_served_ < batch_.size() / 2 && cache_.length() == batch_position_ && int64_t(id) == batch_input_ &&
         (greedy_ || sampler.state() == batch_states_[batch_served_]);
}

uint32_t GraphDecoder::step(uint32_t id, Sampler& sampler, int64_t ahead) {
  TG_CHECK(available_, "GraphDecoder: {} cannot replay decode steps", model_.device().str());
  TG_CHECK(cache_.length() < cache_.capacity(), "KVCache: 1 more position does not fit ({} of {} used)",
           cache_.length(), cache_.capacity());
  TG_CHECK(int64_t(id) < model_.config.vocab_size, "generate: token {} is outside the model's vocabulary of {}", id,
           model_.config.vocab_size);
  const SamplerOptions& o = sampler.options();
  TG_CHECK(o.is_greedy() == greedy_, "GraphDecoder: built for {} decoding, but the sampler is {}",
           greedy_ ? "greedy" : "sampled", o.is_greedy() ? "greedy" : "sampled");
  TG_CHECK(!graph_ || o == captured_,
           "GraphDecoder: the sampler's options changed after the step was captured (temperature {}, top_k {}, "
           "top_p {}; captured {}, {}, {})",
           o.temperature, o.top_k, o.top_p, captured_.temperature, captured_.top_k, captured_.top_p);
  if (continues_batch(id, sampler)) return serve(sampler);
  // Stream-ordered fills (no copy from the host) where the device does not already hold the value.
  if (device_token_ != int64_t(id)) token_.fill_(double(id));
  if (device_position_ != cache_.length()) position_.fill_(double(cache_.length()));
  if (!graph_) capture(o);  // records, runs nothing: the replays below do the steps
  const int64_t n = std::min({kLookahead, std::max<int64_t>(ahead, 1), cache_.capacity() - cache_.length()});
  if (!greedy_) {  // the batch's uniforms, drawn by the host Sampler in order; its state set back as tokens are served
    std::vector<double> u(static_cast<size_t>(n));
    batch_states_.assign(1, sampler.state());
    for (double& x : u) {
      x = sampler.next_uniform();
      batch_states_.push_back(sampler.state());
    }
    sampler.set_state(batch_states_.front());
    uniforms_.narrow(0, 0, n).copy_(tensor(u, Options(kFloat64).device(model_.device())));
  }
  slot_.fill_(0.0);
  for (int64_t i = 0; i < n; ++i) graph_->replay();
  replays_ += n;
  batch_ = ring_.narrow(0, 0, n).to_vector<double>();  // the batch's one synchronisation
  batch_served_ = 0;
  batch_position_ = cache_.length();
  batch_input_ = int64_t(id);
  device_position_ = cache_.length() + n;                           // the graph's position += 1, n times
  device_token_ = static_cast<int64_t>(batch_[size_t(2 * n - 2)]);  // the last id, in token_
  return serve(sampler);
}

uint32_t GraphDecoder::serve(Sampler& sampler) {
  const uint32_t next = drawn_token_id(batch_[2 * batch_served_], batch_[2 * batch_served_ + 1]);
  ++batch_served_;
  if (!greedy_) sampler.set_state(batch_states_[batch_served_]);  // as if the host had drawn this token
  ++steps_;
  cache_.advance(1);
  batch_position_ = cache_.length();
  batch_input_ = int64_t(next);
  return next;
}

}  // namespace tapegrad::lm
