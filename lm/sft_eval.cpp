// sft_eval.cpp — answer-token loss over held-out instruction-tuning examples (see sft_eval.h).
#include "lm/sft_eval.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "nn/loss.h"

namespace tapegrad::lm {

EvalResult evaluate_sft(const nn::TransformerLM& model, const std::vector<SftExample>& examples, int64_t batch_size,
                        uint32_t pad_id, size_t row_length) {
  TG_CHECK(!examples.empty(), "evaluate: no held-out examples");
  TG_CHECK(batch_size > 0, "evaluate: batch size must be positive, got {}", batch_size);
  NoGradGuard no_grad;
  const Device device = model.device();
  double total = 0;  // Σ −log p over answer tokens, in double
  uint64_t tokens = 0;
  std::vector<size_t> which;
  for (size_t start = 0; start < examples.size(); start += size_t(batch_size)) {
    which.resize(std::min(size_t(batch_size), examples.size() - start));
    std::iota(which.begin(), which.end(), start);
    const data::Batch b = sft_batch(examples, which, pad_id, row_length);
    uint64_t n = 0;
    for (size_t i : which) n += examples[i].answer_tokens();
    total += nn::cross_entropy(model.forward(b.inputs.to(device)), b.targets.to(device)).item<double>() * double(n);
    tokens += n;
  }
  EvalResult r;
  r.loss = total / double(tokens);
  r.perplexity = std::exp(r.loss);
  r.tokens = tokens;
  r.windows = examples.size();
  return r;
}

std::vector<std::pair<std::string, EvalResult>> evaluate_sft_by_group(const nn::TransformerLM& model,
                                                                      const std::vector<SftExample>& examples,
                                                                      int64_t batch_size, uint32_t pad_id,
                                                                      size_t row_length) {
  std::vector<std::pair<std::string, EvalResult>> out;
  const std::vector<std::string> groups = sft_groups(examples);
  if (groups.size() < 2) return out;
  for (const std::string& group : groups) {
    std::vector<SftExample> members;
    for (const SftExample& ex : examples)
      if (ex.group == group) members.push_back(ex);
    out.emplace_back(group, evaluate_sft(model, members, batch_size, pad_id, row_length));
  }
  return out;
}

}  // namespace tapegrad::lm
