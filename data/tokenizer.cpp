// tokenizer.cpp — GPT-2 BPE: start from single-byte ids, repeatedly merge the adjacent pair of
// lowest rank (all its occurrences, left to right) until no pair has a rank. The rank of every
// adjacent pair is kept in an array and only the pairs next to a merged symbol are looked up again.
#include "data/tokenizer.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <thread>

#include "data/utf8.h"
#include "kernels/error.h"

namespace tapegrad::data {

Tokenizer::Tokenizer(BpeModel model, size_t cache_capacity)
    : model_(std::move(model)),
      splitter_(model_.special_tokens),
      cuts_(model_.special_tokens),
      cache_capacity_(cache_capacity) {
  TG_CHECK(model_.vocab.size() < std::numeric_limits<uint32_t>::max(), "Tokenizer: vocabulary of {} is too large",
           model_.vocab.size());
  for (size_t id = 0; id < model_.vocab.size(); ++id) id_of_bytes_.emplace(model_.vocab[id], uint32_t(id));  // first id wins
  for (int b = 0; b < 256; ++b) {
    auto it = id_of_bytes_.find(std::string(1, char(b)));
    TG_CHECK(it != id_of_bytes_.end(), "Tokenizer: byte 0x{:02x} has no single-byte token in the vocabulary", b);
    byte_ids_[b] = it->second;
  }
  for (size_t rank = 0; rank < model_.merges.size(); ++rank) {
    const auto& [left, right] = model_.merges[rank];
    auto l = id_of_bytes_.find(left), r = id_of_bytes_.find(right), m = id_of_bytes_.find(left + right);
    TG_CHECK(l != id_of_bytes_.end() && r != id_of_bytes_.end() && m != id_of_bytes_.end(),
             "Tokenizer: merge {} names bytes that are not in the vocabulary", rank);
    merges_.insert(l->second, r->second, {uint32_t(rank), m->second});  // first rank wins
  }
  for (const std::string& special : model_.special_tokens) {
    auto it = id_of_bytes_.find(special);
    TG_CHECK(it != id_of_bytes_.end(), "Tokenizer: special token \"{}\" is not in the vocabulary", special);
    special_ids_.push_back(it->second);
  }
}

void Tokenizer::merge_ids(std::vector<uint32_t>& out, size_t start) const {
  uint32_t* ids = out.data() + start;
  size_t n = out.size() - start;
  if (n < 2) return;
  thread_local std::vector<uint32_t> ranks;  // ranks[i]: rank of the pair (ids[i], ids[i + 1])
  ranks.resize(n - 1);
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = merges_.rank(ids[i], ids[i + 1]);
  while (n > 1) {
    size_t first = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (ranks[i] < ranks[first]) first = i;
    if (ranks[first] == MergeTable::kNoRank) break;
    const uint32_t a = ids[first], b = ids[first + 1];
    const uint32_t merged = merges_.find(a, b)->merged_id;
    // merge_pair_in_place from `first` on (ranks are unique, so no occurrence lies before it), keeping
    // the ranks of untouched pairs and looking up those next to a merged symbol
    size_t w = first;
    bool previous_merged = false;
    for (size_t i = first; i < n;) {
      if (i + 1 < n && ids[i] == a && ids[i + 1] == b) {
        ids[w] = merged;
        if (w > 0) ranks[w - 1] = merges_.rank(ids[w - 1], merged);
        previous_merged = true;
        ++w, i += 2;
      } else {
        ids[w] = ids[i];
        if (previous_merged) ranks[w - 1] = merges_.rank(ids[w - 1], ids[w]);
        if (i + 1 < n) ranks[w] = ranks[i];  // w <= i: ranks[i] is read before anything past w is written
        previous_merged = false;
        ++w, ++i;
      }
    }
    n = w;
  }
  out.resize(start + n);
}

void Tokenizer::encode_pretoken(std::string_view pretoken, std::vector<uint32_t>& out, PretokenCache& cache) const {
  if (const auto* hit = cache.index.find(pretoken)) {
    out.insert(out.end(), cache.ids.begin() + hit->first, cache.ids.begin() + hit->first + hit->second);
    return;
  }
  const size_t start = out.size();
  for (unsigned char c : pretoken) out.push_back(byte_ids_[c]);
  merge_ids(out, start);
  if (cache_capacity_ == 0) return;
  if (cache.index.size() >= cache_capacity_ || cache.ids.size() > std::numeric_limits<uint32_t>::max() / 2) {
    cache.index.clear();
    cache.ids.clear();
  }
  cache.index[pretoken] = {uint32_t(cache.ids.size()), uint32_t(out.size() - start)};
  cache.ids.insert(cache.ids.end(), out.begin() + std::ptrdiff_t(start), out.end());
}

void Tokenizer::encode_with_cache(std::string_view text, std::vector<uint32_t>& out, PretokenCache& cache) const {
  splitter_.split(
      text,
      [&](std::string_view piece) {
        pretokenizer_.split(piece, [&](std::string_view pretoken) { encode_pretoken(pretoken, out, cache); });
      },
      [&](size_t special_index) { out.push_back(special_ids_[special_index]); });
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size() / 3 + 1);
  encode_with_cache(text, out, cache_);
  return out;
}

std::vector<uint32_t> Tokenizer::encode_ordinary(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size() / 3 + 1);
  pretokenizer_.split(text, [&](std::string_view pretoken) { encode_pretoken(pretoken, out, cache_); });
  return out;
}

std::vector<uint32_t> Tokenizer::encode_parallel(std::string_view text, int num_threads) {
  TG_CHECK(num_threads >= 1, "Tokenizer::encode_parallel: num_threads {} must be at least 1", num_threads);
  const auto pieces = size_t(num_threads);
  // Piece p is [bound(p), bound(p + 1)), bound(p) = the first cut at or after p/pieces of the text; each
  // thread finds its own two bounds (next_cut is monotone, so the pieces tile the text).
  auto bound = [&](size_t p) {
    if (p == 0) return size_t(0);
    if (p == pieces) return text.size();
    return std::min(text.size(), cuts_.next_cut(text, text.size() * p / pieces));
  };
  if (thread_caches_.size() + 1 < pieces) thread_caches_.resize(pieces - 1);
  std::vector<std::vector<uint32_t>> outputs(pieces);
  std::vector<std::exception_ptr> errors(pieces);
  auto run = [&](size_t p) {
    try {
      const size_t begin = bound(p), end = bound(p + 1);
      if (begin >= end) return;
      outputs[p].reserve((end - begin) / 3 + 1);
      encode_with_cache(text.substr(begin, end - begin), outputs[p], p == 0 ? cache_ : thread_caches_[p - 1]);
    } catch (...) {
      errors[p] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> workers;
    for (size_t p = 1; p < pieces; ++p) workers.emplace_back(run, p);
    run(0);
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  size_t total = 0;
  for (const auto& o : outputs) total += o.size();
  std::vector<uint32_t> out = std::move(outputs[0]);
  out.reserve(total);
  for (size_t p = 1; p < pieces; ++p) out.insert(out.end(), outputs[p].begin(), outputs[p].end());
  return out;
}

std::string Tokenizer::decode_bytes(const std::vector<uint32_t>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    TG_CHECK(ids[i] < model_.vocab.size(), "Tokenizer::decode: id {} at position {} is outside the vocabulary (size {})",
             ids[i], i, model_.vocab.size());
    out += model_.vocab[ids[i]];
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<uint32_t>& ids) const { return replace_invalid_utf8(decode_bytes(ids)); }

}  // namespace tapegrad::data
