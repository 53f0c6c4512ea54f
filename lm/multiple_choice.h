// multiple_choice.h — multiple-choice evaluation in HellaSwag's format (`tapegrad eval --choices FILE.jsonl`).
//
// The file: one JSON object per line (blank lines skipped) with
//   "ctx" (or "context"): string   "endings": [string, …] (at least 2)   "label": int, or a string holding one
//   (HellaSwag writes "label": "3"), the index of the right ending.
// Scoring, as lm-evaluation-harness scores HellaSwag: each ending is read after the context (joined by one space
// unless the context ends in, or the ending starts with, whitespace); its score is the mean loss per token of the
// ending's tokens given everything before them,
//   score_e = −(1/|e|) Σ_{i ∈ e} log p(x_i | x_<i),
// and the predicted ending is the one with the lowest score. All endings of an example run as one batch
// [E, L] (right-padded; the causal mask keeps padding out of every scored position). A sequence longer than the
// model's context + 1 loses tokens from the left of the context.
// Reported: accuracy p over n examples, its standard error √(p(1 − p)/n), and the chance level, the mean of
// 1/endings.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lm/text_codec.h"
#include "nn/transformer_lm.h"

namespace tapegrad::lm {

struct ChoiceExample {
  std::string context;
  std::vector<std::string> endings;
  int64_t label = 0;  // index into endings
  int64_t line = 0;   // 1-based line of the file
};

// The examples of a JSONL text; `name` is the file name the errors start with ("name:LINE: field 'label': …").
// One tapegrad::Error for the first bad line; an error when there is no example at all.
std::vector<ChoiceExample> parse_choice_examples(std::string_view text, const std::string& name);
std::vector<ChoiceExample> read_choice_examples(const std::string& path);

// The context joined with an ending as scored ("ctx" + " " + ending, see above): the ending's part.
std::string ending_text(const std::string& context, const std::string& ending);

// The mean loss per token of each ending's tokens after the context's (ids already encoded), one batched
// forward without a tape, where the model is. An error when an ending has no token to score.
std::vector<double> score_endings(const nn::TransformerLM& model, std::span<const uint32_t> context_ids,
                                  const std::vector<std::vector<uint32_t>>& ending_ids);

struct ChoiceResult {
  int64_t n = 0, correct = 0;
  double accuracy = 0, standard_error = 0, chance = 0;
  std::vector<int64_t> predicted;  // per example
};

// Encodes (context: codec.encode_prompt, ending: codec.encode_text of ending_text) and scores every example;
// an error names `name`:LINE of the example.
ChoiceResult evaluate_choices(const nn::TransformerLM& model, TextCodec& codec,
                              const std::vector<ChoiceExample>& examples, const std::string& name = "examples");

}  // namespace tapegrad::lm
