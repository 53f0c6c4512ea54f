// bpe_model.h — what BPE training produces and the tokenizer consumes: the vocabulary (id -> raw
// bytes), the merges in the order they were learned, and the special tokens.
//
// Id order made by train_bpe (the CS336 reference order): special tokens first, in the order given
// (so "<|endoftext|>" is id 0 when it is the only one), then the 256 single bytes 0x00..0xFF, then
// one id per merge in merge order. A model loaded from GPT-2 files keeps the ids of its vocab.json.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace tapegrad::data {

struct BpeModel {
  std::vector<std::string> vocab;                            // id -> bytes
  std::vector<std::pair<std::string, std::string>> merges;   // (left bytes, right bytes), in rank order
  std::vector<std::string> special_tokens;
};

}  // namespace tapegrad::data
