// multiple_choice.cpp — the HellaSwag-format reader and the mean-loss-per-token scoring (see multiple_choice.h).
#include "lm/multiple_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/io/exact_number.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "data/file_io.h"
#include "data/json_file.h"
#include "kernels/error.h"

namespace tapegrad::lm {

namespace {

using json = nlohmann::json;

constexpr int64_t kIgnore = -100;

bool blank(std::string_view line) { return line.find_first_not_of(" \t\r\n") == std::string_view::npos; }

// "label": 2 or "label": "2" → 2, within [0, n).
int64_t parse_label(const json& v, size_t n, const std::string& where) {
  uint64_t label = 0;
  if (v.is_number_unsigned()) {
    label = v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    throw Error(fmt::format("{}: field 'label': {} is negative", where, v.dump()));
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    const bool digits = !s.empty() && s.size() <= 18 && std::all_of(s.begin(), s.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    TG_CHECK(digits, "{}: field 'label': the string \"{}\" does not hold a non-negative integer", where,
             s.size() > 40 ? s.substr(0, 40) + "…" : s);
    label = parse_number<uint64_t>(s, fmt::format("{}: field 'label'", where));
  } else {
    throw Error(fmt::format("{}: field 'label' is a JSON {} ({}), not an integer or a string holding one", where,
                            v.type_name(), v.is_number() ? v.dump() : "…"));
  }
  TG_CHECK(label < n, "{}: field 'label': {} is not an index of the {} endings (0 .. {})", where, label, n, n - 1);
  return int64_t(label);
}

ChoiceExample parse_line(std::string_view line, const std::string& where) {
  json j;
  try {
    j = json::parse(line.begin(), line.end());
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not JSON ({})", where, data::json_error_reason(e.what())));
  }
  TG_CHECK(j.is_object(), "{}: a JSON {}, not an object with \"ctx\", \"endings\" and \"label\"", where, j.type_name());
  ChoiceExample ex;
  const char* ctx_key = j.contains("ctx") ? "ctx" : "context";
  const auto ctx = j.find(ctx_key);
  TG_CHECK(ctx != j.end(), "{}: field 'ctx' (or 'context') is missing", where);
  TG_CHECK(ctx->is_string(), "{}: field '{}' is a JSON {}, not a string", where, ctx_key, ctx->type_name());
  ex.context = ctx->get<std::string>();
  const auto endings = j.find("endings");
  TG_CHECK(endings != j.end(), "{}: field 'endings' is missing", where);
  TG_CHECK(endings->is_array(), "{}: field 'endings' is a JSON {}, not a list of strings", where,
           endings->type_name());
  TG_CHECK(endings->size() >= 2, "{}: field 'endings' holds {} ending(s); a choice needs at least 2", where,
           endings->size());
  for (size_t i = 0; i < endings->size(); ++i) {
    const json& e = (*endings)[i];
    TG_CHECK(e.is_string(), "{}: field 'endings'[{}] is a JSON {}, not a string", where, i, e.type_name());
    ex.endings.push_back(e.get<std::string>());
  }
  const auto label = j.find("label");
  TG_CHECK(label != j.end(), "{}: field 'label' is missing", where);
  ex.label = parse_label(*label, ex.endings.size(), where);
  return ex;
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

}  // namespace

std::vector<ChoiceExample> parse_choice_examples(std::string_view text, const std::string& name) {
  std::vector<ChoiceExample> out;
  int64_t line_no = 0;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(at, nl - at);
    at = nl + 1;
    ++line_no;
    if (blank(line)) continue;
    ChoiceExample ex = parse_line(line, fmt::format("{}:{}", name, line_no));
    ex.line = line_no;
    out.push_back(std::move(ex));
  }
  TG_CHECK(!out.empty(), "{}: no examples (one JSON object per line with \"ctx\", \"endings\" and \"label\")", name);
  return out;
}

std::vector<ChoiceExample> read_choice_examples(const std::string& path) {
  return parse_choice_examples(data::read_whole_file(path, "--choices"), path);
}

std::string ending_text(const std::string& context, const std::string& ending) {
  const bool join = !context.empty() && !ending.empty() && !is_space(context.back()) && !is_space(ending.front());
  return join ? " " + ending : ending;
}

std::vector<double> score_endings(const nn::TransformerLM& model, std::span<const uint32_t> context_ids,
                                  const std::vector<std::vector<uint32_t>>& ending_ids) {
  TG_CHECK(!ending_ids.empty(), "score_endings: no endings");
  const int64_t window = model.config.context_length + 1;  // tokens one forward can use: T inputs, T targets
  // Each ending's sequence (context then ending, cut from the left to the window) and its first scored index.
  struct Row {
    std::vector<uint32_t> ids;
    size_t first_scored;  // ids[first_scored..] are the ending's, each predicted from the ids before it
  };
  std::vector<Row> rows;
  size_t longest = 0;
  for (size_t e = 0; e < ending_ids.size(); ++e) {
    Row r;
    r.ids.assign(context_ids.begin(), context_ids.end());
    r.ids.insert(r.ids.end(), ending_ids[e].begin(), ending_ids[e].end());
    size_t first = context_ids.size();
    if (int64_t(r.ids.size()) > window) {
      const size_t cut = r.ids.size() - size_t(window);
      r.ids.erase(r.ids.begin(), r.ids.begin() + int64_t(cut));
      first = first > cut ? first - cut : 0;
    }
    r.first_scored = std::max<size_t>(first, 1);  // the first id of a sequence has nothing to be predicted from
    TG_CHECK(r.first_scored < r.ids.size(),
             "ending {} has no token to score ({} token(s) after a context of {}: an empty ending, or nothing before "
             "its only token)", e, ending_ids[e].size(), context_ids.size());
    longest = std::max(longest, r.ids.size());
    rows.push_back(std::move(r));
  }
  // inputs [E, L] = ids[0..L−1], targets [E, L] = ids[1..L] on the ending's positions, ignored elsewhere
  const int64_t E = int64_t(rows.size()), L = int64_t(longest) - 1;
  std::vector<int64_t> inputs(size_t(E * L), 0), targets(size_t(E * L), kIgnore);
  for (int64_t e = 0; e < E; ++e) {
    const Row& r = rows[size_t(e)];
    for (size_t t = 0; t + 1 < r.ids.size(); ++t) {
      inputs[size_t(e * L) + t] = int64_t(r.ids[t]);
      if (t + 1 >= r.first_scored) targets[size_t(e * L) + t] = int64_t(r.ids[t + 1]);
    }
  }
  NoGradGuard no_grad;
  const Device device = model.device();
  const Tensor logits = model.forward(from_vector(inputs, {E, L}).to(device));  // [E, L, V]
  const Tensor target = from_vector(targets, {E, L}).to(device);
  std::vector<double> scores;
  for (int64_t e = 0; e < E; ++e)  // the mean over the ending's tokens: cross_entropy's mean over valid rows
    scores.push_back(cross_entropy(logits.select(0, e), target.select(0, e), kIgnore).item<double>());
  return scores;
}

ChoiceResult evaluate_choices(const nn::TransformerLM& model, TextCodec& codec,
                              const std::vector<ChoiceExample>& examples, const std::string& name) {
  ChoiceResult r;
  double chance = 0;
  for (const ChoiceExample& ex : examples) {
    const std::vector<uint32_t> context = codec.encode_prompt(ex.context);
    std::vector<std::vector<uint32_t>> endings;
    for (const std::string& ending : ex.endings) endings.push_back(codec.encode_text(ending_text(ex.context, ending)));
    std::vector<double> scores;
    try {
      scores = score_endings(model, context, endings);
    } catch (const Error& e) {
      throw Error(fmt::format("{}:{}: {}", name, ex.line, e.what()));
    }
    // The lowest mean loss; NaN never wins (a tie goes to the first).
    int64_t best = 0;
    double best_score = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < scores.size(); ++i)
      if (scores[i] < best_score) best_score = scores[i], best = int64_t(i);
    r.predicted.push_back(best);
    r.correct += best == ex.label ? 1 : 0;
    chance += 1.0 / double(ex.endings.size());
  }
  r.n = int64_t(examples.size());
  TG_CHECK(r.n > 0, "evaluate_choices: no examples");
  r.accuracy = double(r.correct) / double(r.n);
  r.standard_error = std::sqrt(r.accuracy * (1 - r.accuracy) / double(r.n));
  r.chance = chance / double(r.n);
  return r;
}

}  // namespace tapegrad::lm
