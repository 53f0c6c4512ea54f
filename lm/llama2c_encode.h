// llama2c_encode.h — the fast encoder behind Llama2cTokenizer::encode: exactly the ids of run.c's algorithm
// (Llama2cTokenizer::encode_reference, which rescans the whole list after every merge: O(n²) per text), at
// about the speed of our BPE encoder.
//
// run.c's rule: start from the characters' pieces (byte fallback for a character without one); then, while some
// adjacent pair concatenates to a piece scoring above −1e10, replace the pair whose piece scores HIGHEST — the
// leftmost of equal scores — by that piece (the lowest id of equal pieces). Here:
//   • pair table: (left, right) → the merged piece, precomputed for every split of every mergeable piece of up to
//     64 bytes; a longer concatenation, or one with an empty piece, is looked up by its text, as run.c does.
//   • cuts: no merge can ever join two adjacent symbols x | y when no mergeable piece holds the last byte of x's
//     text followed by the first byte of y's: every token that will hold x ends with x's text, every one that will
//     hold y starts with y's, so their concatenation would hold those two bytes. The text is cut at such points
//     (between characters, never inside one) and the pieces between cuts merge independently: run.c's process on
//     the whole is theirs interleaved, each step being the best pair of one of them. So a piece's ids depend on
//     its bytes only, and are cached (Llama2cEncodeCache, one per thread).
//   • merging one piece: up to 32 symbols, an array of pair scores rescanned left to right as run.c does (only the
//     two pairs beside a merge looked up again); longer (a run of spaces, a long word with no cut), a heap of
//     candidate pairs ordered by (score, leftmost), entries made stale by a merge skipped when popped.
//
//   lm::Llama2cEncoder enc(pieces, scores);
//   lm::Llama2cEncodeCache cache;             // one per thread; keeps ids of repeated pieces between calls
//   enc.encode("Once upon a time", true, space_id, ids, cache);
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/merge_table.h"
#include "data/string_table.h"

namespace tapegrad::lm {

class Llama2cEncoder;

// The per-thread state of encoding: the ids of the pieces between cuts seen so far (bounded: cleared when full)
// and scratch buffers. Belongs to one encoder at a time (used with another, it starts empty).
class Llama2cEncodeCache {
 public:
  size_t cached_pieces() const { return index_.size(); }

 private:
  friend class Llama2cEncoder;
  struct Candidate {
    float score;
    uint32_t left, right;         // symbol positions
    uint32_t left_id, right_id;   // their ids when the candidate was made (stale once either changed)
    uint32_t merged;
  };
  uint64_t owner_ = 0;  // the encoder's serial number
  data::FlatStringMap<std::pair<uint32_t, uint32_t>> index_;  // bytes → (offset, count) in ids_
  std::vector<uint32_t> ids_;
  std::vector<uint32_t> symbols_, merged_, prev_, next_;
  std::vector<Candidate> heap_;
};

class Llama2cEncoder {
 public:
  // The tokenizer's pieces and scores by id (copied).
  Llama2cEncoder(const std::vector<std::string>& pieces, const std::vector<float>& scores);

  // Appends the ids of `text` (BOS, id 1, first when `bos`) to `out`; `space` is the id of the piece " " (the
  // dummy prefix, put before a non-empty text).
  void encode(std::string_view text, bool bos, uint32_t space, std::vector<uint32_t>& out,
              Llama2cEncodeCache& cache) const;

 private:
  static constexpr uint32_t kNone = UINT32_MAX;

  uint32_t merge_of(uint32_t left, uint32_t right) const;  // the merged piece's id, kNone when they do not merge
  bool can_cut(uint32_t left, uint32_t right) const;       // no merge can ever join these symbols' tokens
  size_t char_symbols(std::string_view ch, uint32_t* symbols) const;  // 1 to 4 symbols of one character
  void flush(std::string_view bytes, bool cacheable, std::vector<uint32_t>& out, Llama2cEncodeCache& cache) const;
  void merge_scan(std::vector<uint32_t>& symbols, Llama2cEncodeCache& cache) const;
  void merge_heap(std::vector<uint32_t>& symbols, Llama2cEncodeCache& cache) const;

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  data::FlatStringMap<uint32_t> index_;  // text → the lowest id holding it
  std::vector<uint32_t> canon_;          // id → the lowest id of the same text
  data::MergeTable pairs_;               // (canon left, canon right) → merged id (rank unused)
  std::array<uint32_t, 256> byte_char_{};                 // one-byte character → id, kNone without a piece
  std::unordered_map<uint32_t, uint32_t> multibyte_chars_;  // 2–4-byte character (bytes packed) → id
  std::vector<uint8_t> joinable_;        // [a << 8 | b]: 1 when a mergeable piece holds byte a followed by b
  uint64_t serial_;
};

}  // namespace tapegrad::lm
