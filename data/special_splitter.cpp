// special_splitter.cpp — finds special tokens with one string search per token (next occurrence
// cached), so a text with k special tokens is scanned O(k) times at most.
#include "data/special_splitter.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "kernels/error.h"

namespace tapegrad::data {

SpecialSplitter::SpecialSplitter(std::vector<std::string> special_tokens) : tokens_(std::move(special_tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i)
    TG_CHECK(!tokens_[i].empty(), "special tokens: token {} is the empty string", i);
  by_length_.resize(tokens_.size());
  std::iota(by_length_.begin(), by_length_.end(), size_t{0});
  // std::sort with the index as tie-break = a stable sort (libstdc++ 12's std::stable_sort trips clang's
  // -Wdeprecated-declarations inside its own headers).
  std::sort(by_length_.begin(), by_length_.end(), [&](size_t a, size_t b) {
    return tokens_[a].size() != tokens_[b].size() ? tokens_[a].size() > tokens_[b].size() : a < b;
  });
}

void SpecialSplitter::split(std::string_view text, const std::function<void(std::string_view)>& on_text,
                            const std::function<void(size_t)>& on_special) const {
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  std::vector<size_t> next(by_length_.size(), 0);  // next occurrence at or after `cursor`, per token
  auto refresh = [&](size_t k, size_t from) {
    const size_t p = text.find(tokens_[by_length_[k]], from);
    next[k] = p == std::string_view::npos ? kNone : p;
  };
  for (size_t k = 0; k < by_length_.size(); ++k) refresh(k, 0);
  size_t cursor = 0;
  while (true) {
    size_t best_pos = kNone, best_k = 0;
    for (size_t k = 0; k < by_length_.size(); ++k) {
      if (next[k] < cursor) refresh(k, cursor);
      if (next[k] < best_pos) best_pos = next[k], best_k = k;  // strict <: longest wins a tie
    }
    if (best_pos == kNone) break;
    if (best_pos > cursor) on_text(text.substr(cursor, best_pos - cursor));
    on_special(by_length_[best_k]);
    cursor = best_pos + tokens_[by_length_[best_k]].size();
  }
  if (cursor < text.size()) on_text(text.substr(cursor));
}

}  // namespace tapegrad::data
