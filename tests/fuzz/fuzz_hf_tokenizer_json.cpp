// fuzz_hf_tokenizer_json.cpp — libFuzzer target: the input is a Hugging Face tokenizer.json
// (data/hf_tokenizer_json.h). Asserts: load_hf_tokenizer_json throws only tapegrad::Error; a model it
// loads, written again with save_hf_tokenizer_json (which may refuse, with Error, what the format cannot
// hold) and reloaded, is the same model (vocabulary, merges, special tokens); a Tokenizer built from it
// (or refused with Error) gives back a fixed text from its ids.
#include <string>

#include "data/hf_tokenizer_json.h"
#include "data/tokenizer.h"
#include "fuzz_common.h"
#include "tokenizer_checks.h"
#include "kernels/error.h"

using namespace tapegrad;
using namespace tapegrad::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile input("tokenizer.json");
  static fuzz::ScratchDir scratch;
  const std::string& path = input.set(fuzz::as_view(data, size));

  BpeModel model;
  try {
    model = load_hf_tokenizer_json(path);
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
    return 0;
  }
  const std::string copy = scratch.file("tokenizer.json");
  bool saved = true;
  try {
    save_hf_tokenizer_json(model, copy);
  } catch (const Error&) {
    saved = false;
  }
  if (saved) {
    const BpeModel again = load_hf_tokenizer_json(copy);
    FUZZ_ASSERT(again.vocab == model.vocab, "vocabulary changed in the save/load round trip");
    FUZZ_ASSERT(again.merges == model.merges, "merges changed in the save/load round trip");
    FUZZ_ASSERT(again.special_tokens == model.special_tokens, "special tokens changed in the save/load round trip");
  }
  fuzz::check_tokenizer_round_trip(model, "Hello, world! 123 \xc3\xa9t\xc3\xa9 \xff\xfe  x<|endoftext|>y");
  return 0;
}
