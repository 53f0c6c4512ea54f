// fuzz_choices.cpp — libFuzzer target: the multiple-choice JSONL reader (lm/multiple_choice.h, `eval --choices`).
// The input is the file's text. Asserts: parse_choice_examples throws only tapegrad::Error, and every message
// starts with the file name; what it reads is what the file says: every example has at least two endings, a
// label that indexes them and a line number within the file, lines in increasing order; each example's line,
// parsed alone, gives the same example; ending_text joins with at most one added space.
#include <string>

#include "fuzz_common.h"
#include "kernels/error.h"
#include "lm/multiple_choice.h"

using namespace tapegrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::as_view(data, size);
  std::vector<lm::ChoiceExample> examples;
  try {
    examples = lm::parse_choice_examples(text, "fuzz.jsonl");
  } catch (const Error& e) {
    FUZZ_ASSERT(std::string_view(e.what()).starts_with("fuzz.jsonl:"), std::string("no file name: ") + e.what());
    fuzz::note_rejected(e.what());
    return 0;
  }
  FUZZ_ASSERT(!examples.empty(), "no examples and no error");
  int64_t lines = 1;
  for (char c : text) lines += c == '\n' ? 1 : 0;
  int64_t previous = 0;
  for (const lm::ChoiceExample& ex : examples) {
    FUZZ_ASSERT(ex.endings.size() >= 2, "fewer than two endings");
    FUZZ_ASSERT(ex.label >= 0 && ex.label < int64_t(ex.endings.size()), "the label is not an index of the endings");
    FUZZ_ASSERT(ex.line > previous && ex.line <= lines, "line numbers out of order or past the file");
    previous = ex.line;
    // The same line alone reads the same example.
    size_t at = 0;
    for (int64_t l = 1; l < ex.line; ++l) at = text.find('\n', at) + 1;
    const size_t nl = text.find('\n', at);
    const std::string_view line = text.substr(at, nl == std::string_view::npos ? text.size() - at : nl - at);
    const std::vector<lm::ChoiceExample> alone = lm::parse_choice_examples(line, "line");
    FUZZ_ASSERT(alone.size() == 1 && alone[0].context == ex.context && alone[0].endings == ex.endings &&
                    alone[0].label == ex.label,
                "the line read alone gives another example");
    for (const std::string& ending : ex.endings) {
      const std::string joined = lm::ending_text(ex.context, ending);
      FUZZ_ASSERT(joined == ending || joined == " " + ending, "ending_text changed the ending");
    }
  }
  return 0;
}
