// special_splitter.h — cuts text at special tokens (e.g. "<|endoftext|>") before pretokenization.
// Where several special tokens match at one position the longest wins; the earliest match wins
// otherwise.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::data {

class SpecialSplitter {
 public:
  explicit SpecialSplitter(std::vector<std::string> special_tokens);

  // Calls on_text(piece) for each run of ordinary text (never empty) and on_special(index into
  // special_tokens()) for each special token, in text order.
  void split(std::string_view text, const std::function<void(std::string_view)>& on_text,
             const std::function<void(size_t)>& on_special) const;

  const std::vector<std::string>& special_tokens() const { return tokens_; }

 private:
  std::vector<std::string> tokens_;
  std::vector<size_t> by_length_;  // indices into tokens_, longest first
};

}  // namespace tapegrad::data
