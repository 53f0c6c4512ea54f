// cut_finder.h — where a text may be cut so that its two sides, each split at special tokens and
// pretokenized with the GPT-2 regex on its own, give exactly the pieces of the whole text. Used to
// stream a training file in blocks and to split a text between threads.
//
// A position p (0 < p < size) is a cut when either
//  (1) p ends an occurrence [s, p) of a special token that the splitter must choose: no occurrence
//      of any special token starts before s and ends after s, and no longer special token occurs
//      at s; or
//  (2) text[p-1] is '\n', text[p-2] and text[p] are ASCII graphic characters (0x21..0x7e), and no
//      occurrence of a special token starts before p and ends after p.
// The reasoning is in cut_finder.cpp (and data/README.md). A decision reads at most the longest
// special token's length past p; a position whose decision would need bytes past the end of the
// given text is not a cut, so a cut found in a prefix of a stream is a cut of the whole stream.
#pragma once
#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::data {

class CutFinder {
 public:
  explicit CutFinder(std::vector<std::string> special_tokens);

  bool is_cut(std::string_view text, size_t p) const;
  // The largest cut p with p > after, or 0 when there is none.
  size_t last_cut(std::string_view text, size_t after = 0) const;
  // The smallest cut p with p >= from, or std::string_view::npos when there is none.
  size_t next_cut(std::string_view text, size_t from) const;
  // Bytes past p that a decision may read (the longest special token, at least 1).
  size_t lookahead() const { return lookahead_; }

 private:
  bool crossed(std::string_view text, size_t p) const;  // an occurrence starts before p and ends after it
  bool chosen(std::string_view text, size_t s, size_t length) const;

  std::vector<std::string> tokens_;
  size_t lookahead_ = 1;
  std::array<bool, 256> may_end_cut_{};  // '\n' and the last byte of each special token
};

}  // namespace tapegrad::data
