// cut_finder.cpp — the two cut rules of cut_finder.h and why they are safe.
//
// Rule (1), special-token end. The splitter repeatedly takes the earliest occurrence at or after its
// cursor (the longest where several start there) and moves the cursor to its end. If no occurrence
// starts before s and ends after s, every match taken before s ends at or before s, so the cursor
// reaches s without passing it, and the occurrence at s (the longest there) is taken. The text
// [0, p) sees the same occurrences up to that point; the text [p, ...) is what the whole-text splitter
// scans next, from p. Pretokenization runs on the pieces between special tokens, which are the same.
//
// Rule (2), newline. If no occurrence crosses p, the splitter takes the same matches on both sides
// (an occurrence taken by the whole-text pass lies entirely on one side, one that crosses p does not
// exist), so the pieces between special tokens are the same except that the piece around p (if any)
// is cut in two at p. Inside that piece: every valid character starts a regex match (letters, digits,
// whitespace, anything else), and '\n' can only be matched by `\s+(?!\S)` or `\s+` (the optional
// prefix of the other alternatives is a literal space). Since text[p-2] is not whitespace, the match
// holding p-1 starts at p-1; since text[p] is not whitespace, it ends at p: it is "\n" both in the
// whole text (`\s+`, the lookahead seeing text[p]) and in [0, p) (`\s+(?!\S)` at the end). No match
// attempt starting before p-1 can read p (it would have to consume text[p-2] and '\n' as whitespace),
// so the matches before p-1 are the same, and the pattern has no lookbehind, so the matches from p on
// are the same. Requiring a single '\n' matters: after "x  \n" or "x\r\n" the whole-text pass splits
// the whitespace run differently from a text that ends there ("  " + "\n" versus "  \n"). ASCII
// graphic bytes are used as "not whitespace" because no byte of them is part of a multi-byte or an
// invalid UTF-8 sequence.
#include "data/cut_finder.h"

#include <algorithm>

namespace tapegrad::data {
namespace {
bool ascii_graphic(char c) { return c >= 0x21 && c <= 0x7e; }
}  // namespace

CutFinder::CutFinder(std::vector<std::string> special_tokens) : tokens_(std::move(special_tokens)) {
  may_end_cut_['\n'] = true;
  for (const std::string& t : tokens_) {
    if (t.empty()) continue;  // the splitter rejects empty tokens; here they simply never occur
    lookahead_ = std::max(lookahead_, t.size());
    may_end_cut_[static_cast<unsigned char>(t.back())] = true;
  }
}

bool CutFinder::crossed(std::string_view text, size_t p) const {
  for (const std::string& t : tokens_) {
    const size_t n = t.size();
    if (n < 2) continue;
    if (p + n - 1 > text.size()) return true;  // cannot tell yet: treat as crossed
    const size_t lo = p >= n - 1 ? p - (n - 1) : 0;
    // An occurrence found in [lo, p + n - 1) starts in [lo, p - 1] and so ends after p.
    if (text.substr(lo, p + n - 1 - lo).find(t) != std::string_view::npos) return true;
  }
  return false;
}

bool CutFinder::chosen(std::string_view text, size_t s, size_t length) const {
  if (s + lookahead_ > text.size()) return false;  // a longer token at s cannot be ruled out yet
  for (const std::string& t : tokens_)
    if (t.size() > length && text.compare(s, t.size(), t) == 0) return false;
  return !crossed(text, s);
}

bool CutFinder::is_cut(std::string_view text, size_t p) const {
  if (p == 0 || p >= text.size()) return false;
  for (const std::string& t : tokens_)
    if (!t.empty() && p >= t.size() && text.compare(p - t.size(), t.size(), t) == 0 && chosen(text, p - t.size(), t.size()))
      return true;
  return p >= 2 && text[p - 1] == '\n' && ascii_graphic(text[p - 2]) && ascii_graphic(text[p]) && !crossed(text, p);
}

size_t CutFinder::last_cut(std::string_view text, size_t after) const {
  for (size_t p = text.size(); p > after + 1;) {
    --p;  // candidates p = text.size() - 1 down to after + 1
    if (may_end_cut_[static_cast<unsigned char>(text[p - 1])] && is_cut(text, p)) return p;
  }
  return 0;
}

size_t CutFinder::next_cut(std::string_view text, size_t from) const {
  for (size_t p = std::max<size_t>(from, 1); p < text.size(); ++p)
    if (may_end_cut_[static_cast<unsigned char>(text[p - 1])] && is_cut(text, p)) return p;
  return std::string_view::npos;
}

}  // namespace tapegrad::data
