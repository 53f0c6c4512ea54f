// tokenizer.h — byte-level BPE encode/decode over a BpeModel (trained, or loaded from GPT-2
// files). Special tokens are matched first (longest first where they overlap) and map to their
// own ids; the rest is pretokenized with the GPT-2 regex and each pretoken is merged by rank, as
// GPT-2/tiktoken do. Encoded pretokens are cached (bounded; one cache per encoding thread, kept
// between calls).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/bpe_model.h"
#include "data/cut_finder.h"
#include "data/merge_table.h"
#include "data/pretokenizer.h"
#include "data/special_splitter.h"
#include "data/string_table.h"

namespace tapegrad::data {

class Tokenizer {
 public:
  // Throws tapegrad::Error when a merge names bytes that are not in the vocabulary, a byte has no
  // single-byte token, or a special token is not in the vocabulary.
  explicit Tokenizer(BpeModel model, size_t cache_capacity = 1 << 16);

  // Not thread-safe (the pretoken cache is updated): use one Tokenizer per thread.
  std::vector<uint32_t> encode(std::string_view text);
  // The ids of `text` as ordinary text: a special token's text ("<|endoftext|>") is encoded like any other
  // text, never as the special id (tiktoken's encode_ordinary). For text a user typed into a chat message.
  std::vector<uint32_t> encode_ordinary(std::string_view text);
  // Same ids as encode(text), computed by `num_threads` threads on ranges cut where cut_finder.h
  // allows (after a special token, or at a newline between ASCII graphic characters), each thread
  // with its own cache kept between calls. Not thread-safe either. Without any cut it runs on one thread.
  std::vector<uint32_t> encode_parallel(std::string_view text, int num_threads);
  // The raw bytes of the ids; throws tapegrad::Error naming the position of an id outside the vocabulary.
  std::string decode_bytes(const std::vector<uint32_t>& ids) const;
  // decode_bytes with invalid UTF-8 replaced by U+FFFD (Python's errors="replace").
  std::string decode(const std::vector<uint32_t>& ids) const;

  size_t vocab_size() const { return model_.vocab.size(); }
  const BpeModel& model() const { return model_; }

 private:
  struct PretokenCache {
    FlatStringMap<std::pair<uint32_t, uint32_t>> index;  // pretoken -> (offset, count) in ids
    std::vector<uint32_t> ids;
  };
  void encode_pretoken(std::string_view pretoken, std::vector<uint32_t>& out, PretokenCache& cache) const;
  void merge_ids(std::vector<uint32_t>& out, size_t start) const;
  void encode_with_cache(std::string_view text, std::vector<uint32_t>& out, PretokenCache& cache) const;

  BpeModel model_;
  std::unordered_map<std::string, uint32_t> id_of_bytes_;
  MergeTable merges_;
  uint32_t byte_ids_[256] = {};
  std::vector<uint32_t> special_ids_;           // per SpecialSplitter token index
  SpecialSplitter splitter_;
  CutFinder cuts_;
  Pretokenizer pretokenizer_;
  PretokenCache cache_;                         // encode(), and thread 0 of encode_parallel()
  std::vector<PretokenCache> thread_caches_;    // threads 1.. of encode_parallel()
  size_t cache_capacity_;
};

}  // namespace tapegrad::data
