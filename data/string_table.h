// string_table.h — FlatStringMap<V>: a hash map from byte strings to V, looked up with a string_view
// (no std::string built per lookup), for the hot paths of BPE: pretoken counting and the tokenizer's
// pretoken cache. Open addressing over one array of slots (hash tag + entry number), entries kept
// in insertion order in a vector (iteration yields std::pair<std::string, V>).
#pragma once
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/error.h"

namespace tapegrad::data {

// A fast 64-bit hash of short byte strings (8 bytes per multiply, then a final mix).
inline uint64_t hash_bytes(std::string_view s) {
  constexpr uint64_t k1 = 0x9e3779b97f4a7c15ull, k2 = 0xbf58476d1ce4e5b9ull, k3 = 0x94d049bb133111ebull;
  uint64_t h = (s.size() + 1) * k1;
  const char* p = s.data();
  size_t n = s.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * k2;
    h ^= h >> 31;
  }
  uint64_t w = 0;
  for (size_t i = 0; i < n; ++i) w |= uint64_t(uint8_t(p[i])) << (8 * i);
  h = (h ^ w) * k3;
  h ^= h >> 29;
  h *= k2;
  return h ^ (h >> 32);
}

template <class V>
class FlatStringMap {
 public:
  using value_type = std::pair<std::string, V>;

  V* find(std::string_view key) {
    if (entries_.empty()) return nullptr;
    const uint64_t h = hash_bytes(key);
    const uint64_t slot = slots_[probe(key, h)];
    return slot == 0 ? nullptr : &entries_[entry_of(slot)].second;
  }
  const V* find(std::string_view key) const { return const_cast<FlatStringMap*>(this)->find(key); }

  // The value of `key`, inserted as V{} when the key is new.
  V& operator[](std::string_view key) {
    if ((entries_.size() + 1) * 4 > slots_.size() * 3) grow();
    const uint64_t h = hash_bytes(key);
    const size_t at = probe(key, h);
    if (slots_[at] != 0) return entries_[entry_of(slots_[at])].second;
    TG_CHECK(entries_.size() < std::numeric_limits<uint32_t>::max() - 1, "FlatStringMap: too many entries");
    entries_.emplace_back(std::string(key), V{});
    slots_[at] = (h & ~uint64_t(0xffffffff)) | uint64_t(entries_.size());
    return entries_.back().second;
  }

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear() {
    entries_.clear();
    std::fill(slots_.begin(), slots_.end(), 0);
  }
  void reserve(size_t n) {
    entries_.reserve(n);
    while (n * 4 > slots_.size() * 3) grow();
  }
  typename std::vector<value_type>::const_iterator begin() const { return entries_.begin(); }
  typename std::vector<value_type>::const_iterator end() const { return entries_.end(); }

 private:
  static bool same_bytes(const char* a, const char* b, size_t n) {
    if (n > 16) return std::memcmp(a, b, n) == 0;
    for (size_t i = 0; i < n; ++i)  // most pretokens are short: no call
      if (a[i] != b[i]) return false;
    return true;
  }

  // A slot holds 0 (empty) or (high 32 bits of the hash) << 32 | (entry index + 1).
  static size_t entry_of(uint64_t slot) { return size_t(slot & 0xffffffff) - 1; }

  // The slot holding `key`, or the empty slot where it would go.
  size_t probe(std::string_view key, uint64_t h) const {
    const uint64_t tag = h & ~uint64_t(0xffffffff);
    for (size_t i = size_t(h) & mask_;; i = (i + 1) & mask_) {
      const uint64_t slot = slots_[i];
      if (slot == 0) return i;
      if ((slot & ~uint64_t(0xffffffff)) == tag) {
        const std::string& k = entries_[entry_of(slot)].first;
        if (k.size() == key.size() && same_bytes(k.data(), key.data(), key.size())) return i;
      }
    }
  }

  void grow() {
    const size_t capacity = slots_.empty() ? 64 : slots_.size() * 2;
    slots_.assign(capacity, 0);
    mask_ = capacity - 1;
    for (size_t e = 0; e < entries_.size(); ++e) {
      const uint64_t h = hash_bytes(entries_[e].first);
      size_t i = size_t(h) & mask_;
      while (slots_[i] != 0) i = (i + 1) & mask_;
      slots_[i] = (h & ~uint64_t(0xffffffff)) | uint64_t(e + 1);
    }
  }

  std::vector<value_type> entries_;
  std::vector<uint64_t> slots_;  // power-of-two size, at most 3/4 full
  size_t mask_ = 0;
};

}  // namespace tapegrad::data
