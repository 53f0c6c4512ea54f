// llama2c_encode.cpp — run.c's encoding with a pair table, cuts, a per-thread cache and a heap (see the header).
#include "lm/llama2c_encode.h"

#include <algorithm>
#include <atomic>

#include "kernels/error.h"

namespace tapegrad::lm {

namespace {

constexpr float kNoMergeScore = -1e10f;  // run.c: a pair merges only when its piece scores above this
constexpr size_t kTablePieceMax = 64;    // pieces up to this length are in the pair table
constexpr size_t kScanMax = 32;          // pieces between cuts of up to this many symbols: rescan; longer: heap
constexpr size_t kCacheMaxBytes = 256;   // pieces between cuts cached when at most this long
constexpr size_t kCacheEntries = size_t(1) << 16;
constexpr uint32_t kBos = 1;

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// A 2–4-byte character as one number: continuation bytes are never 0, so the length is implied.
uint32_t pack_char(std::string_view ch) {
  uint32_t key = 0;
  for (size_t i = 0; i < ch.size(); ++i) key |= uint32_t(static_cast<unsigned char>(ch[i])) << (8 * i);
  return key;
}

bool is_multibyte_char(std::string_view s) {
  if (s.size() < 2 || s.size() > 4) return false;
  return std::all_of(s.begin() + 1, s.end(), [](char c) { return is_continuation(static_cast<unsigned char>(c)); });
}

uint64_t next_serial() {
  static std::atomic<uint64_t> serial{0};
  return ++serial;
}

}  // namespace

Llama2cEncoder::Llama2cEncoder(const std::vector<std::string>& pieces, const std::vector<float>& scores)
    : pieces_(pieces), scores_(scores), canon_(pieces.size()), joinable_(size_t(1) << 16, 0), serial_(next_serial()) {
  TG_CHECK(pieces_.size() == scores_.size() && pieces_.size() < kNone, "Llama2cEncoder: {} pieces, {} scores",
           pieces_.size(), scores_.size());
  index_.reserve(pieces_.size());
  for (size_t id = 0; id < pieces_.size(); ++id) {
    const size_t known = index_.size();
    uint32_t& lowest = index_[pieces_[id]];
    if (index_.size() != known) lowest = uint32_t(id);  // a new text: this is the first id holding it
    canon_[id] = lowest;
  }
  byte_char_.fill(kNone);
  for (const auto& [text, id] : index_) {
    if (text.size() == 1) byte_char_[static_cast<unsigned char>(text[0])] = id;
    if (is_multibyte_char(text)) multibyte_chars_.emplace(pack_char(text), id);
    if (!(scores_[id] > kNoMergeScore)) continue;  // never merged (NaN included)
    for (size_t i = 0; i + 1 < text.size(); ++i)
      joinable_[size_t(static_cast<unsigned char>(text[i])) << 8 | static_cast<unsigned char>(text[i + 1])] = 1;
    if (text.size() > kTablePieceMax) continue;
    const std::string_view t = text;
    for (size_t k = 1; k < t.size(); ++k) {
      const uint32_t* left = index_.find(t.substr(0, k));
      if (!left) continue;
      const uint32_t* right = index_.find(t.substr(k));
      if (right) pairs_.insert(*left, *right, {0, id});
    }
  }
}

uint32_t Llama2cEncoder::merge_of(uint32_t left, uint32_t right) const {
  const size_t a = pieces_[left].size(), b = pieces_[right].size();
  if (a != 0 && b != 0 && a + b <= kTablePieceMax) {
    const data::MergeTable::Merge* m = pairs_.find(canon_[left], canon_[right]);
    return m ? m->merged_id : kNone;
  }
  const uint32_t* id = index_.find(pieces_[left] + pieces_[right]);
  return id && scores_[*id] > kNoMergeScore ? *id : kNone;
}

bool Llama2cEncoder::can_cut(uint32_t left, uint32_t right) const {
  const std::string& a = pieces_[left];
  const std::string& b = pieces_[right];
  if (a.empty() || b.empty()) return false;
  return !joinable_[size_t(static_cast<unsigned char>(a.back())) << 8 | static_cast<unsigned char>(b.front())];
}

size_t Llama2cEncoder::char_symbols(std::string_view ch, uint32_t* symbols) const {
  uint32_t id = kNone;
  if (ch.size() == 1) {
    id = byte_char_[static_cast<unsigned char>(ch[0])];
  } else if (const auto it = multibyte_chars_.find(pack_char(ch)); it != multibyte_chars_.end()) {
    id = it->second;
  }
  if (id != kNone) {
    symbols[0] = id;
    return 1;
  }
  for (size_t i = 0; i < ch.size(); ++i) symbols[i] = uint32_t(static_cast<unsigned char>(ch[i])) + 3;  // byte fallback
  return ch.size();
}

void Llama2cEncoder::encode(std::string_view text, bool bos, uint32_t space, std::vector<uint32_t>& out,
                            Llama2cEncodeCache& cache) const {
  if (cache.owner_ != serial_) {
    cache.index_.clear();
    cache.ids_.clear();
    cache.owner_ = serial_;
  }
  std::vector<uint32_t>& symbols = cache.symbols_;  // of the piece since the last cut
  symbols.clear();
  if (bos) symbols.push_back(kBos);
  if (text.empty()) {
    out.insert(out.end(), symbols.begin(), symbols.end());
    return;
  }
  TG_CHECK(space < pieces_.size(), "Llama2cEncoder: the dummy prefix id {} is outside the vocabulary", space);
  symbols.push_back(space);
  size_t piece_begin = 0;  // where the piece since the last cut starts in `text`
  bool first = true;       // the first piece holds BOS and the dummy prefix, which are not in `text`: not cached
  uint32_t ch_symbols[4];
  for (size_t i = 0; i < text.size();) {
    // A character: a byte and the continuation bytes after it, at most 4 bytes in all (as run.c groups them).
    size_t n = 1;
    while (i + n < text.size() && n < 4 && is_continuation(static_cast<unsigned char>(text[i + n]))) ++n;
    const size_t count = char_symbols(text.substr(i, n), ch_symbols);
    if (can_cut(symbols.back(), ch_symbols[0])) {
      flush(text.substr(piece_begin, i - piece_begin), !first, out, cache);
      piece_begin = i;
      first = false;
    }
    symbols.insert(symbols.end(), ch_symbols, ch_symbols + count);
    i += n;
  }
  flush(text.substr(piece_begin), !first, out, cache);
}

void Llama2cEncoder::flush(std::string_view bytes, bool cacheable, std::vector<uint32_t>& out,
                           Llama2cEncodeCache& cache) const {
  std::vector<uint32_t>& symbols = cache.symbols_;
  cacheable = cacheable && bytes.size() <= kCacheMaxBytes;
  if (cacheable) {
    if (const auto* hit = cache.index_.find(bytes)) {
      const auto at = cache.ids_.begin() + std::ptrdiff_t(hit->first);
      out.insert(out.end(), at, at + std::ptrdiff_t(hit->second));
      symbols.clear();
      return;
    }
  }
  if (symbols.size() <= kScanMax)
    merge_scan(symbols, cache);
  else
    merge_heap(symbols, cache);
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    if (cache.index_.size() >= kCacheEntries) {
      cache.index_.clear();
      cache.ids_.clear();
    }
    cache.index_[bytes] = {uint32_t(cache.ids_.size()), uint32_t(symbols.size())};
    cache.ids_.insert(cache.ids_.end(), symbols.begin(), symbols.end());
  }
  symbols.clear();
}

// run.c's loop on an array: merged[i] is the piece of the pair (s[i], s[i + 1]); the best is the first of the
// highest score, as run.c's scan finds it.
void Llama2cEncoder::merge_scan(std::vector<uint32_t>& s, Llama2cEncodeCache& cache) const {
  size_t n = s.size();
  if (n < 2) return;
  std::vector<uint32_t>& merged = cache.merged_;
  merged.resize(n - 1);
  for (size_t i = 0; i + 1 < n; ++i) merged[i] = merge_of(s[i], s[i + 1]);
  while (n >= 2) {
    float best = kNoMergeScore;
    size_t at = n;
    for (size_t i = 0; i + 1 < n; ++i)
      if (merged[i] != kNone && scores_[merged[i]] > best) {
        best = scores_[merged[i]];
        at = i;
      }
    if (at == n) break;
    s[at] = merged[at];
    std::copy(s.begin() + std::ptrdiff_t(at) + 2, s.begin() + std::ptrdiff_t(n), s.begin() + std::ptrdiff_t(at) + 1);
    std::copy(merged.begin() + std::ptrdiff_t(at) + 1, merged.begin() + std::ptrdiff_t(n) - 1,
              merged.begin() + std::ptrdiff_t(at));
    --n;
    if (at > 0) merged[at - 1] = merge_of(s[at - 1], s[at]);
    if (at + 1 < n) merged[at] = merge_of(s[at], s[at + 1]);
  }
  s.resize(n);
}

// The same choices with a heap: symbols stay at their positions in a linked list (a merge keeps the left one),
// so "leftmost" is "lowest position"; the heap's best is the highest score, then the lowest left position. Every
// adjacent pair that merges has a valid candidate in the heap; one whose symbols changed or stopped being
// neighbours is skipped when popped.
void Llama2cEncoder::merge_heap(std::vector<uint32_t>& s, Llama2cEncodeCache& cache) const {
  const size_t n = s.size();
  std::vector<uint32_t>& prev = cache.prev_;
  std::vector<uint32_t>& next = cache.next_;
  std::vector<Llama2cEncodeCache::Candidate>& heap = cache.heap_;
  prev.resize(n);
  next.resize(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = i == 0 ? kNone : uint32_t(i - 1);
    next[i] = i + 1 == n ? kNone : uint32_t(i + 1);
  }
  const auto worse = [](const Llama2cEncodeCache::Candidate& a, const Llama2cEncodeCache::Candidate& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  const auto candidate = [&](uint32_t left, uint32_t right) {
    const uint32_t m = merge_of(s[left], s[right]);
    if (m != kNone) heap.push_back({scores_[m], left, right, s[left], s[right], m});
    return m != kNone;
  };
  heap.clear();
  for (size_t i = 0; i + 1 < n; ++i) candidate(uint32_t(i), uint32_t(i + 1));
  std::make_heap(heap.begin(), heap.end(), worse);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const Llama2cEncodeCache::Candidate c = heap.back();
    heap.pop_back();
    if (next[c.left] != c.right || s[c.left] != c.left_id || s[c.right] != c.right_id) continue;  // stale
    s[c.left] = c.merged;
    s[c.right] = kNone;  // removed: no candidate matches it again
    const uint32_t after = next[c.right];
    next[c.left] = after;
    if (after != kNone) prev[after] = c.left;
    if (prev[c.left] != kNone && candidate(prev[c.left], c.left)) std::push_heap(heap.begin(), heap.end(), worse);
    if (after != kNone && candidate(c.left, after)) std::push_heap(heap.begin(), heap.end(), worse);
  }
  size_t w = 0;
  for (uint32_t i = 0; i != kNone; i = next[i]) s[w++] = s[i];  // position 0 is never removed
  s.resize(w);
}

}  // namespace tapegrad::lm
