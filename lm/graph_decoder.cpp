// graph_decoder.cpp — one decode step captured as a device graph and replayed per token (see graph_decoder.h).
#include "lm/graph_decoder.h"

#include <algorithm>
#include <limits>

#include "autograd/tapegrad.h"
#include "kernels/backend.h"

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
  if (greedy) {
    ring_ = zeros({kLookahead, 2}, Options(kFloat64).device(device));
    slot_ = zeros({1}, ints);
  }
}

GraphDecoder::~GraphDecoder() = default;

void GraphDecoder::capture() {
  kernels::Backend& backend = kernels::backend(model_.device());
  const int64_t V = model_.config.vocab_size;
  try {
    graph_ = kernels::capture_device_work(backend, [&] {
      NoGradGuard no_grad;
      const Tensor row = model_.forward_decode(token_, cache_, position_).reshape({V});  // [V]
      if (greedy_) {
        const Tensor best = argmax(row, 0, /*keepdim=*/true);  // [1] int64, the lowest id among equal logits
        token_.view({1}).copy_(best);
        const Tensor pair = cat({best.to(kFloat64), index_select(row, 0, best).to(kFloat64)}, 0);  // {id, logit}
        index_copy_(ring_, 0, slot_, pair.view({1, 2}));  // ring row `slot`, then the next row
        slot_.add_(one_);
      } else {
        readback_ = row;
      }
      position_.add_(one_);
    });
  } catch (const Error& e) {
    throw Error(fmt::format("generate: a decode step on {} cannot be captured as a CUDA graph (--cuda-graph off "
                            "decodes without one): {}",
                            model_.device().str(), e.what()));
  }
  TG_CHECK(graph_ != nullptr, "generate: the backend of {} cannot capture CUDA graphs", model_.device().str());
}

uint32_t GraphDecoder::step(uint32_t id, Sampler& sampler, int64_t ahead) {
  TG_CHECK(available_, "GraphDecoder: {} cannot replay decode steps", model_.device().str());
  TG_CHECK(cache_.length() < cache_.capacity(), "KVCache: 1 more position does not fit ({} of {} used)",
           cache_.length(), cache_.capacity());
  TG_CHECK(int64_t(id) < model_.config.vocab_size, "generate: token {} is outside the model's vocabulary of {}", id,
           model_.config.vocab_size);
  // The next token of the greedy batch in hand, if this call continues its chain.
  if (greedy_ && batch_served_ < batch_.size() / 2 && cache_.length() == batch_position_ && int64_t(id) == batch_input_)
    return serve_greedy();
  // Stream-ordered fills (no copy from the host) where the device does not already hold the value.
  if (device_token_ != int64_t(id)) token_.fill_(double(id));
  if (device_position_ != cache_.length()) position_.fill_(double(cache_.length()));
  if (!graph_) capture();  // records, runs nothing: the replays below do the steps
  if (greedy_) {
    const int64_t n = std::min({kLookahead, std::max<int64_t>(ahead, 1), cache_.capacity() - cache_.length()});
    slot_.fill_(0.0);
    for (int64_t i = 0; i < n; ++i) graph_->replay();
    replays_ += n;
    batch_ = ring_.narrow(0, 0, n).to_vector<double>();  // the batch's one synchronisation
    batch_served_ = 0;
    batch_position_ = cache_.length();
    batch_input_ = int64_t(id);
    device_position_ = cache_.length() + n;              // the graph's position += 1, n times
    device_token_ = static_cast<int64_t>(batch_[size_t(2 * n - 2)]);  // the last argmax, in token_
    return serve_greedy();
  }
  graph_->replay();
  ++replays_;
  ++steps_;
  cache_.advance(1);
  device_position_ = cache_.length();
  device_token_ = int64_t(id);
  return readback_.dtype() == kFloat64 ? sampler.sample(std::span<const double>(readback_.to_vector<double>()))
                                       : sampler.sample(std::span<const float>(readback_.to_vector<float>()));
}

uint32_t GraphDecoder::serve_greedy() {
  const double id = batch_[2 * batch_served_], logit = batch_[2 * batch_served_ + 1];
  const auto next = static_cast<int64_t>(id);
  TG_CHECK(logit > -std::numeric_limits<double>::infinity() && logit < std::numeric_limits<double>::infinity(),
           "Sampler: the logit of token {} is {} (NaN or +inf, or every logit is -inf)", next, logit);
  ++batch_served_;
  ++steps_;
  cache_.advance(1);
  batch_position_ = cache_.length();
  batch_input_ = next;
  return uint32_t(next);
}

}  // namespace tapegrad::lm
