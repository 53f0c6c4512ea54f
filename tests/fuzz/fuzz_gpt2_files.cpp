// fuzz_gpt2_files.cpp — libFuzzer target: GPT-2 vocab.json + merges.txt (data/gpt2_files.h). The input
// is split at its first NUL byte: vocab.json before it, merges.txt after it (no NUL: merges.txt empty).
// Asserts: load_gpt2_files throws only tapegrad::Error; a model it loads has ids 0..N-1 and merges of
// tokens in the vocabulary; saved again with save_gpt2_files (which may refuse, with Error, two ids of
// one byte string) and reloaded it is the same model; a Tokenizer built from it (or refused with Error)
// encodes and decodes a fixed text back to the same bytes.
#include <string>
#include <unordered_set>

#include "data/gpt2_files.h"
#include "data/tokenizer.h"
#include "fuzz_common.h"
#include "tokenizer_checks.h"
#include "kernels/error.h"

using namespace tapegrad;
using namespace tapegrad::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile vocab_file("vocab.json"), merges_file("merges.txt");
  static fuzz::ScratchDir scratch;
  const fuzz::Split parts = fuzz::split_at(fuzz::as_view(data, size), '\0');
  const std::string vocab_path = vocab_file.set(parts.first);
  const std::string merges_path = merges_file.set(parts.second);

  BpeModel model;
  try {
    model = load_gpt2_files(vocab_path, merges_path);
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
    return 0;
  }
  const std::unordered_set<std::string> vocab(model.vocab.begin(), model.vocab.end());
  for (const auto& [left, right] : model.merges) {
    FUZZ_ASSERT(vocab.count(left) && vocab.count(right), "a merge names a token outside the vocabulary");
    FUZZ_ASSERT(vocab.count(left + right), "a merge's result is not in the vocabulary");
  }

  const std::string vocab2 = scratch.file("vocab.json"), merges2 = scratch.file("merges.txt");
  bool saved = true;
  try {
    save_gpt2_files(model, vocab2, merges2);
  } catch (const Error&) {
    saved = false;  // two ids with one byte string: vocab.json cannot say that
  }
  if (saved) {
    const BpeModel again = load_gpt2_files(vocab2, merges2);
    FUZZ_ASSERT(again.vocab == model.vocab, "vocabulary changed in the save/load round trip");
    FUZZ_ASSERT(again.merges == model.merges, "merges changed in the save/load round trip");
  }

  fuzz::check_tokenizer_round_trip(model, "Hello, world! 123 \xc3\xa9t\xc3\xa9 \xff\xfe  x");
  return 0;
}
