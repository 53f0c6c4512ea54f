// bpe_trainer.cpp — BPE training with incremental pair counts.
//
// Each distinct pretoken is a "word" (its symbol ids and its count). We keep the count of every
// adjacent pair, the words each pair occurs in, and a max-heap of (count, pair) entries with lazy
// deletion: whenever a pair's count changes a new entry is pushed, and a popped entry whose count no
// longer matches is dropped. A merge touches only the words that contain the merged pair. Words are
// sorted by their bytes first, so the result does not depend on how the counting was split.
#include "data/bpe_trainer.h"

#include <algorithm>
#include <filesystem>
#include <queue>
#include <unordered_map>

#include <fmt/ranges.h>

#include "data/pretoken_counts.h"
#include "kernels/error.h"

namespace tapegrad::data {
namespace {

using PairKey = uint64_t;
PairKey pair_key(uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; }
uint32_t pair_left(PairKey k) { return uint32_t(k >> 32); }
uint32_t pair_right(PairKey k) { return uint32_t(k & 0xffffffffu); }

struct Word {
  std::vector<uint32_t> symbols;
  int64_t count;
};

struct HeapEntry {
  int64_t count;
  PairKey pair;
};

class PairStatistics {
 public:
  explicit PairStatistics(const std::vector<std::string>& vocab)
      : heap_(RanksBelow{&vocab}) {}

  // Adds delta to the pair's count; `new_in_word` records that word_index now contains the pair.
  void add(PairKey pair, int64_t delta, uint32_t word_index, bool new_in_word) {
    counts_[pair].count += delta;
    if (new_in_word) words_[pair].push_back(word_index);
    touched_.push_back(pair);
  }

  // Pushes a fresh heap entry for every pair whose count changed since the last call.
  void publish() {
    for (PairKey pair : touched_) {  // may repeat: the pushed count makes a repeat a no-op
      auto it = counts_.find(pair);
      if (it == counts_.end()) continue;
      PairCount& c = it->second;
      if (c.count > 0) {
        if (c.count != c.pushed) heap_.push({c.count, pair});
        c.pushed = c.count;
      } else {
        counts_.erase(it);
        words_.erase(pair);
      }
    }
    touched_.clear();
  }

  // The most frequent pair (ties: lexicographically greatest bytes), or false when none is left.
  bool best(PairKey& pair) {
    while (!heap_.empty()) {
      const HeapEntry top = heap_.top();
      auto it = counts_.find(top.pair);
      if (it != counts_.end() && it->second.count == top.count) {
        pair = top.pair;
        return true;
      }
      heap_.pop();  // stale
    }
    return false;
  }

  std::vector<uint32_t> take_words(PairKey pair) {
    std::vector<uint32_t> w = std::move(words_[pair]);
    words_.erase(pair);
    return w;
  }

 private:
  // x ranks below y: smaller count, or equal count and smaller (left bytes, right bytes); std::string
  // compares bytes as unsigned char, like Python's bytes.
  struct RanksBelow {
    const std::vector<std::string>* vocab;
    bool operator()(const HeapEntry& x, const HeapEntry& y) const {
      if (x.count != y.count) return x.count < y.count;
      const int left = (*vocab)[pair_left(x.pair)].compare((*vocab)[pair_left(y.pair)]);
      if (left != 0) return left < 0;
      return (*vocab)[pair_right(x.pair)] < (*vocab)[pair_right(y.pair)];
    }
  };

  struct PairCount {
    int64_t count = 0;
    int64_t pushed = 0;  // count of the newest heap entry for this pair (0: none)
  };
  std::unordered_map<PairKey, PairCount> counts_;
  std::unordered_map<PairKey, std::vector<uint32_t>> words_;  // may hold stale or repeated indices
  std::vector<PairKey> touched_;
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, RanksBelow> heap_;
};

bool contains_pair(const std::vector<uint32_t>& s, uint32_t a, uint32_t b) {
  for (size_t i = 0; i + 1 < s.size(); ++i)
    if (s[i] == a && s[i + 1] == b) return true;
  return false;
}

BpeModel base_model(const BpeTrainOptions& options) {
  const size_t base = options.special_tokens.size() + 256;
  TG_CHECK(options.vocab_size >= base,
           "BPE training: vocab_size {} is smaller than {} special tokens + 256 byte tokens", options.vocab_size,
           options.special_tokens.size());
  BpeModel model;
  model.special_tokens = options.special_tokens;
  model.vocab = options.special_tokens;
  for (int b = 0; b < 256; ++b) model.vocab.emplace_back(1, char(b));
  return model;
}

BpeModel train_on_counts(BpeModel model, const PretokenCounts& pretokens, const BpeTrainOptions& options) {
  const size_t wanted_merges = options.vocab_size - model.vocab.size();
  const uint32_t first_byte_id = uint32_t(options.special_tokens.size());
  std::vector<const PretokenCounts::value_type*> sorted;
  sorted.reserve(pretokens.size());
  for (const auto& entry : pretokens) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](auto* x, auto* y) { return x->first < y->first; });
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (const auto* entry : sorted) {
    Word w{{}, entry->second};
    w.symbols.reserve(entry->first.size());
    for (unsigned char c : entry->first) w.symbols.push_back(first_byte_id + c);
    words.push_back(std::move(w));
  }

  model.vocab.reserve(options.vocab_size);
  PairStatistics stats(model.vocab);
  for (uint32_t wi = 0; wi < words.size(); ++wi) {
    const auto& s = words[wi].symbols;
    for (size_t i = 0; i + 1 < s.size(); ++i) stats.add(pair_key(s[i], s[i + 1]), words[wi].count, wi, true);
  }
  stats.publish();

  while (model.merges.size() < wanted_merges) {
    PairKey pair;
    TG_CHECK(stats.best(pair),
             "BPE training: only {} merges are possible on this text but vocab_size {} asks for {} (no adjacent pair "
             "is left)",
             model.merges.size(), options.vocab_size, wanted_merges);
    const uint32_t a = pair_left(pair), b = pair_right(pair);
    const auto merged = uint32_t(model.vocab.size());
    model.merges.emplace_back(model.vocab[a], model.vocab[b]);
    model.vocab.push_back(model.vocab[a] + model.vocab[b]);

    for (uint32_t wi : stats.take_words(pair)) {
      Word& w = words[wi];
      if (!contains_pair(w.symbols, a, b)) continue;  // stale or repeated index
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i)
        stats.add(pair_key(w.symbols[i], w.symbols[i + 1]), -w.count, wi, false);
      merge_pair_in_place(w.symbols, a, b, merged);
      // only pairs with the new symbol are new to this word; the word is already listed under the others
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i)
        stats.add(pair_key(w.symbols[i], w.symbols[i + 1]), w.count, wi,
                  w.symbols[i] == merged || w.symbols[i + 1] == merged);
    }
    stats.publish();
  }
  return model;
}

}  // namespace

BpeModel train_bpe(std::string_view text, const BpeTrainOptions& options) {
  BpeModel model = base_model(options);
  if (options.vocab_size == model.vocab.size()) return model;
  TG_CHECK(!text.empty(), "BPE training: the training text is empty, so none of the {} requested merges is possible",
           options.vocab_size - model.vocab.size());
  return train_on_counts(std::move(model), count_pretokens(text, options.special_tokens, options.num_threads), options);
}

BpeModel train_bpe_file(const std::string& path, const BpeTrainOptions& options) {
  return train_bpe_files({path}, options);
}

BpeModel train_bpe_files(const std::vector<std::string>& paths, const BpeTrainOptions& options) {
  BpeModel model = base_model(options);
  std::error_code error;
  uint64_t bytes = 0;
  for (const std::string& path : paths)
    if (!error) bytes += std::filesystem::file_size(path, error);
  const PretokenCounts counts =
      count_pretokens_in_files(paths, options.special_tokens, options.num_threads, options.file_block_bytes);
  if (options.vocab_size == model.vocab.size()) return model;
  TG_CHECK(error || bytes > 0, "BPE training: {} {} empty, so none of the {} requested merges is possible",
           fmt::join(paths, " + "), paths.size() == 1 ? "is" : "are", options.vocab_size - model.vocab.size());
  return train_on_counts(std::move(model), counts, options);
}

}  // namespace tapegrad::data
