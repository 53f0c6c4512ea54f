// bpe_model.h — what BPE training produces and the tokenizer consumes: the vocabulary (id -> raw
// bytes), the merges in the order they were learned, and the special tokens.
//
// Id order made by train_bpe (the CS336 reference order): special tokens first, in the order given
// (so "<|endoftext|>" is id 0 when it is the only one), then the 256 single bytes 0x00..0xFF, then
// one id per merge in merge order. A model loaded from GPT-2 files keeps the ids of its vocab.json.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tapegrad::data {

struct BpeModel {
  std::vector<std::string> vocab;                            // id -> bytes
  std::vector<std::pair<std::string, std::string>> merges;   // (left bytes, right bytes), in rank order
  std::vector<std::string> special_tokens;
};

// Replaces each non-overlapping occurrence of the pair (a, b) in `ids`, left to right, with
// `merged` — one merge step, the same in training and in encoding.
inline void merge_pair_in_place(std::vector<uint32_t>& ids, uint32_t a, uint32_t b, uint32_t merged) {
  size_t out = 0;
  for (size_t i = 0; i < ids.size();) {
    if (i + 1 < ids.size() && ids[i] == a && ids[i + 1] == b) {
      ids[out++] = merged;
      i += 2;
    } else {
      ids[out++] = ids[i++];
    }
  }
  ids.resize(out);
}

}  // namespace tapegrad::data
