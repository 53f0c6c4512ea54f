// evaluate.h — the mean cross-entropy of a language model over a whole token stream, in one
// deterministic pass (data::SequentialBatches: windows at 0, T, 2T, …), without a tape.
//   loss = Σ_windows Σ_t −log p(x_{t+1} | x_≤t) / tokens,   perplexity = exp(loss)
#pragma once
#include <cstdint>

#include "data/batch.h"
#include "nn/transformer_lm.h"

namespace tapegrad::lm {

struct EvalResult {
  double loss = 0;        // mean over every predicted token (nats)
  double perplexity = 0;  // exp(loss)
  uint64_t tokens = 0;    // predicted tokens (windows · context)
  uint64_t windows = 0;
  uint64_t bytes = 0;          // bytes of the predicted tokens' text (0: not counted, no token byte lengths)
  double bits_per_byte = 0;    // loss · tokens / bytes / ln 2 (lm/bits_per_byte.h); 0 when bytes is 0
};

// Runs where the model is (model.to(device) first): each batch is copied there, and one loss per
// batch comes back. `context` ≤ model.config.context_length (0: the model's). Throws tapegrad::Error when the data
// holds fewer than context + 1 tokens, a token is outside the model's vocabulary, or the context
// is longer than the model's. With `token_bytes` (the byte length of each id's text, lm/bits_per_byte.h) it
// also counts the bytes of the predicted tokens — data[1 .. windows·context] — and reports bits per byte.
EvalResult evaluate(const nn::TransformerLM& model, const data::TokenSource& data, int64_t batch_size,
                    int64_t context = 0, const std::vector<uint32_t>* token_bytes = nullptr);

// The entropy of the stream's token frequencies, −Σ_v p_v ln p_v (nats/token): the loss of the best
// model that ignores context. A language model that learned anything goes well below it.
double unigram_entropy(const data::TokenSource& data);

}  // namespace tapegrad::lm
