// sft_eval.h — the loss of a model on held-out instruction-tuning examples, on the answer tokens only:
//   loss = Σ_examples Σ_{t: trained} −log p(ids[t] | ids[<t]) / Σ answer tokens,   perplexity = exp(loss)
// in one deterministic pass (batches of consecutive examples, right-padded as lm/sft_data.h says), no tape.
// EvalResult.tokens is the number of answer tokens, .windows the number of examples.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lm/evaluate.h"
#include "lm/sft_data.h"
#include "nn/transformer_lm.h"

namespace tapegrad::lm {

// Throws tapegrad::Error when there is no example or batch_size is not positive.
// `row_length`: pad every batch to at least this many positions (sft_batch; the Trainer's SftData::row_length).
EvalResult evaluate_sft(const nn::TransformerLM& model, const std::vector<SftExample>& examples, int64_t batch_size,
                        uint32_t pad_id, size_t row_length = 0);

// The same loss for each group of examples (SftExample::group: a "task" field or the system prompt), groups in
// order of first appearance; empty when all examples are of one group (the overall loss says it all).
std::vector<std::pair<std::string, EvalResult>> evaluate_sft_by_group(const nn::TransformerLM& model,
                                                                      const std::vector<SftExample>& examples,
                                                                      int64_t batch_size, uint32_t pad_id,
                                                                      size_t row_length = 0);

}  // namespace tapegrad::lm
