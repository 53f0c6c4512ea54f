// merge_table.h — MergeTable: (left id, right id) -> (rank, merged id), the lookup at the heart of BPE
// encoding. Open addressing over a power-of-two array of 16-byte slots: a lookup is a multiply, a shift
// and usually one probe into a table that stays in cache (GPT-2: 50k merges, 2 MiB).
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

namespace tapegrad::data {

class MergeTable {
 public:
  struct Merge {
    uint32_t rank;
    uint32_t merged_id;
  };
  static constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();

  // Ids must be below 2^32 - 1. The first merge given for a pair is kept; false for a repeat.
  bool insert(uint32_t left, uint32_t right, Merge merge) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    Slot& slot = slots_[probe(key_of(left, right))];
    if (slot.key != kEmpty) return false;
    slot = {key_of(left, right), merge};
    ++size_;
    return true;
  }
  const Merge* find(uint32_t left, uint32_t right) const {
    if (size_ == 0) return nullptr;
    const Slot& slot = slots_[probe(key_of(left, right))];
    return slot.key == kEmpty ? nullptr : &slot.merge;
  }
  uint32_t rank(uint32_t left, uint32_t right) const {
    const Merge* m = find(left, right);
    return m ? m->rank : kNoRank;
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static constexpr uint64_t kEmpty = std::numeric_limits<uint64_t>::max();  // (2^32-1, 2^32-1): never a pair
  static uint64_t key_of(uint32_t left, uint32_t right) { return (uint64_t(left) << 32) | right; }

  size_t probe(uint64_t key) const {
    for (size_t i = size_t((key * 0x9e3779b97f4a7c15ull) >> shift_);; i = (i + 1) & (slots_.size() - 1))
      if (slots_[i].key == key || slots_[i].key == kEmpty) return i;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    const size_t capacity = old.empty() ? 64 : old.size() * 2;
    slots_.assign(capacity, Slot{kEmpty, {}});
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    for (const Slot& s : old)
      if (s.key != kEmpty) slots_[probe(s.key)] = s;
  }

  std::vector<Slot> slots_;  // at most half full
  unsigned shift_ = 64;
  size_t size_ = 0;
};

}  // namespace tapegrad::data
