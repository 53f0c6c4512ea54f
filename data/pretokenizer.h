// pretokenizer.h — splits ordinary text (no special tokens) into GPT-2 pretokens with the GPT-2
// regex, compiled once by PCRE2 with UTF + UCP + JIT. Bytes that are not valid UTF-8 are never
// dropped: each run the regex cannot match becomes a pretoken of its own (so training and encoding
// handle arbitrary bytes, and decode(encode(x)) == x for any x).
#pragma once
#include <functional>
#include <memory>
#include <string_view>

namespace tapegrad::data {

inline constexpr std::string_view kGpt2Pattern =
    R"('(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class Pretokenizer {
 public:
  explicit Pretokenizer(std::string_view pattern = kGpt2Pattern);
  ~Pretokenizer();
  Pretokenizer(Pretokenizer&&) noexcept;
  Pretokenizer& operator=(Pretokenizer&&) noexcept;

  // Calls on_pretoken for each pretoken of `text`, in order; their concatenation is `text`.
  // Thread-safe: each call uses its own match data.
  void split(std::string_view text, const std::function<void(std::string_view)>& on_pretoken) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tapegrad::data
