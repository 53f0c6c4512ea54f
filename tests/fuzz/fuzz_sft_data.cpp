// fuzz_sft_data.cpp — libFuzzer target: the instruction-tuning JSONL reader (lm/sft_data.h) with a byte-level
// tokenizer (id = byte) and the chat template appended at 256. The input is the file's text.
// Asserts: parse_sft_jsonl throws only tapegrad::Error; for every example it reads, ids and mask have the same
// length, at least one token is trained, the ids are below 260, the length is within the limit, the first id is a
// header, every trained token lies in an assistant turn (after an <|assistant|> header with no <|end|> between, or
// that turn's <|end|>), the targets are ids[t+1] exactly where trained[t+1] and −100 elsewhere, and a batch of
// all the examples has the longest one's length and its rows' targets.
#include <algorithm>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "kernels/error.h"
#include "lm/chat_template.h"
#include "lm/sft_data.h"
#include "lm/text_codec.h"

using namespace tapegrad;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto codec = [] {
    data::BpeModel m;
    for (int b = 0; b < 256; ++b) m.vocab.emplace_back(1, char(b));
    return lm::make_bpe_codec(std::move(m));
  }();
  static const lm::ChatTemplate chat = lm::ChatTemplate::appended(256);
  constexpr size_t kMaxIds = 200;
  std::vector<lm::SftExample> examples;
  try {
    examples = lm::parse_sft_jsonl(fuzz::as_view(data, size), "fuzz.jsonl", *codec, chat, kMaxIds);
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
    return 0;
  }
  FUZZ_ASSERT(!examples.empty(), "parse_sft_jsonl returned no examples without an error");
  size_t longest = 0;
  for (const lm::SftExample& ex : examples) {
    FUZZ_ASSERT(ex.ids.size() == ex.trained.size(), "ids and mask differ in length at " + ex.where);
    FUZZ_ASSERT(ex.ids.size() >= 2 && ex.ids.size() <= kMaxIds, "an example's length is out of bounds");
    FUZZ_ASSERT(ex.answer_tokens() > 0, "an example without a trained token at " + ex.where);
    FUZZ_ASSERT(chat.is_special(ex.ids[0]) && ex.ids[0] != chat.end_id, "the first id is not a header");
    bool in_answer = false;
    for (size_t i = 0; i < ex.ids.size(); ++i) {
      const uint32_t id = ex.ids[i];
      FUZZ_ASSERT(id < chat.vocab_size(), "an id outside the vocabulary");
      if (chat.is_special(id) && id != chat.end_id) {
        FUZZ_ASSERT(!ex.trained[i], "a header is trained");
        in_answer = id == chat.assistant_id;
      } else {
        FUZZ_ASSERT(bool(ex.trained[i]) == in_answer, "the mask disagrees with the turns at " + ex.where);
        if (id == chat.end_id) in_answer = false;
      }
    }
    const std::vector<int64_t> t = ex.targets();
    FUZZ_ASSERT(t.size() == ex.ids.size() - 1, "targets have the wrong length");
    for (size_t i = 0; i < t.size(); ++i)
      FUZZ_ASSERT(t[i] == (ex.trained[i + 1] ? int64_t(ex.ids[i + 1]) : lm::kIgnoreIndex), "a wrong target");
    longest = std::max(longest, ex.ids.size() - 1);
  }
  std::vector<size_t> all(examples.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  const data::Batch b = lm::sft_batch(examples, all, chat.end_id);
  FUZZ_ASSERT(b.targets.size(0) == int64_t(examples.size()) && b.targets.size(1) == int64_t(longest),
              "the batch has the wrong shape");
  const std::vector<int64_t> targets = b.targets.to_vector<int64_t>();
  for (size_t r = 0; r < examples.size(); ++r) {
    const std::vector<int64_t> t = examples[r].targets();
    for (size_t c = 0; c < longest; ++c)
      FUZZ_ASSERT(targets[r * longest + c] == (c < t.size() ? t[c] : lm::kIgnoreIndex), "a wrong batch target");
  }
  return 0;
}
