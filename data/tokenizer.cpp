// tokenizer.cpp — GPT-2 BPE: start from single-byte ids, repeatedly merge the adjacent pair of
// lowest rank (all its occurrences, left to right) until no pair has a rank.
#include "data/tokenizer.h"

#include <exception>
#include <limits>
#include <thread>

#include "data/utf8.h"
#include "kernels/error.h"

namespace tapegrad::data {
namespace {
uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; }
}  // namespace

Tokenizer::Tokenizer(BpeModel model, size_t cache_capacity)
    : model_(std::move(model)), splitter_(model_.special_tokens), cache_capacity_(cache_capacity) {
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
    merges_.try_emplace(pair_key(l->second, r->second), Merge{uint32_t(rank), m->second});  // first rank wins
  }
  for (const std::string& special : model_.special_tokens) {
    auto it = id_of_bytes_.find(special);
    TG_CHECK(it != id_of_bytes_.end(), "Tokenizer: special token \"{}\" is not in the vocabulary", special);
    special_ids_.push_back(it->second);
  }
}

void Tokenizer::encode_pretoken(std::string_view pretoken, std::vector<uint32_t>& out, PretokenCache& cache) const {
  if (auto hit = cache.find(std::string(pretoken)); hit != cache.end()) {
    out.insert(out.end(), hit->second.begin(), hit->second.end());
    return;
  }
  std::vector<uint32_t> ids;
  ids.reserve(pretoken.size());
  for (unsigned char c : pretoken) ids.push_back(byte_ids_[c]);
  while (ids.size() > 1) {
    uint32_t best_rank = std::numeric_limits<uint32_t>::max();
    uint32_t best_left = 0, best_right = 0, best_merged = 0;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      auto it = merges_.find(pair_key(ids[i], ids[i + 1]));
      if (it != merges_.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank;
        best_left = ids[i], best_right = ids[i + 1], best_merged = it->second.merged_id;
      }
    }
    if (best_rank == std::numeric_limits<uint32_t>::max()) break;
    merge_pair_in_place(ids, best_left, best_right, best_merged);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  if (cache.size() >= cache_capacity_) cache.clear();
  if (cache_capacity_ > 0) cache.emplace(pretoken, std::move(ids));
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

std::vector<uint32_t> Tokenizer::encode_parallel(std::string_view text, int num_threads) const {
  TG_CHECK(num_threads >= 1, "Tokenizer::encode_parallel: num_threads {} must be at least 1", num_threads);
  // Cut points: the end of the first special-token match at or after each i/num_threads of the text.
  // One splitter pass over the whole text makes every match final, and a pass started right after a
  // match reproduces the rest of that pass, so the pieces encode exactly as the whole would.
  std::vector<size_t> cuts{0};
  size_t cursor = 0;
  splitter_.split(
      text, [&](std::string_view piece) { cursor = size_t(piece.data() + piece.size() - text.data()); },
      [&](size_t index) {
        cursor += model_.special_tokens[index].size();
        const size_t target = text.size() * cuts.size() / size_t(num_threads);
        if (cuts.size() < size_t(num_threads) && cursor >= target && cursor < text.size()) cuts.push_back(cursor);
      });
  cuts.push_back(text.size());
  const size_t pieces = cuts.size() - 1;
  std::vector<std::vector<uint32_t>> outputs(pieces);
  std::vector<std::exception_ptr> errors(pieces);
  auto run = [&](size_t p) {
    try {
      PretokenCache cache;
      encode_with_cache(text.substr(cuts[p], cuts[p + 1] - cuts[p]), outputs[p], cache);
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
  std::vector<uint32_t> out;
  for (const auto& o : outputs) out.insert(out.end(), o.begin(), o.end());
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
