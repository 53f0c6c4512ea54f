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
};

// Runs where the model is (model.to(device) first): each batch is copied there, and one loss per
// batch comes back. `context` ≤ model.config.context_length (0: the model's). Throws tapegrad::Error when the data
// holds fewer than context + 1 tokens, a token is outside the model's vocabulary, or the context
// is longer than the model's.
EvalResult evaluate(const nn::TransformerLM& model, const data::TokenSource& data, int64_t batch_size,
                    int64_t context = 0);

// The entropy of the stream's token frequencies, −Σ_v p_v ln p_v (nats/token): the loss of the best
// model that ignores context. A language model that learned anything goes well below it.
double unigram_entropy(const data::TokenSource& data);

}  // namespace tapegrad::lm
