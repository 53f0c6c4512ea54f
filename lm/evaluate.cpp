// evaluate.cpp — mean loss and perplexity over a whole token stream (see evaluate.h).
#include "lm/evaluate.h"

#include <cmath>
#include <vector>

#include "lm/bits_per_byte.h"
#include "nn/loss.h"
#include "nn/precision.h"

namespace tapegrad::lm {

EvalResult evaluate(const nn::TransformerLM& model, const data::TokenSource& data, int64_t batch_size,
                    int64_t context, const std::vector<uint32_t>* token_bytes) {
  const int64_t model_context = model.config.context_length;
  if (context <= 0) context = model_context;
  TG_CHECK(context <= model_context, "evaluate: context {} is longer than the model's context_length {}", context,
           model_context);
  TG_CHECK(batch_size > 0, "evaluate: batch size must be positive, got {}", batch_size);
  TG_CHECK(data.size() >= uint64_t(context) + 1,
           "evaluate: the data holds {} tokens, fewer than one window of context {} + 1", data.size(), context);
  NoGradGuard no_grad;
  nn::CastCacheGuard cast_cache;  // bf16 copies of the weights kept across the batches (nn/precision.h)
  const Device device = model.device();  // batches go where the model is
  const data::SequentialBatches batches(data, batch_size, context);
  double total = 0;  // Σ over tokens of −log p, accumulated in double
  uint64_t tokens = 0;
  for (uint64_t i = 0; i < batches.num_batches(); ++i) {
    const data::Batch b = batches[i];
    const auto n = uint64_t(b.targets.numel());
    total += nn::cross_entropy(model.forward(b.inputs.to(device)), b.targets.to(device)).item<double>() * double(n);
    tokens += n;
  }
  EvalResult r;
  r.loss = total / double(tokens);
  r.perplexity = std::exp(r.loss);
  r.tokens = tokens;
  r.windows = batches.num_windows();
  if (token_bytes != nullptr) {  // the windows are contiguous: their targets are data[1 .. windows·context]
    for (uint64_t i = 1; i <= tokens; ++i) {
      const uint32_t id = data[i];
      TG_CHECK(id < token_bytes->size(), "evaluate: token id {} has no byte length (the tokenizer has {} tokens)", id,
               token_bytes->size());
      r.bytes += (*token_bytes)[id];
    }
    r.bits_per_byte = bits_per_byte(total, r.bytes);
  }
  return r;
}

double unigram_entropy(const data::TokenSource& data) {
  std::vector<uint64_t> counts;
  for (uint64_t i = 0; i < data.size(); ++i) {
    const uint32_t id = data[i];
    if (id >= counts.size()) counts.resize(size_t(id) + 1, 0);
    ++counts[id];
  }
  double h = 0;
  for (uint64_t c : counts)
    if (c > 0) {
      const double p = double(c) / double(data.size());
      h -= p * std::log(p);
    }
  return h;
}

}  // namespace tapegrad::lm
