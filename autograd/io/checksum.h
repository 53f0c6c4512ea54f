// checksum.h — the 64-bit checksum of tapegrad's files (checkpoints, int8 models): FNV-1a over
// 64-bit words, h ← (h ⊕ w)·P. Each step is a bijection of h, so any change confined to one word
// always changes the result. Texts and byte blocks are length-prefixed, so moving a boundary between
// two of them changes it too. Not cryptographic: it catches damage, not tampering.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace tapegrad::io {

class Checksum {
 public:
  void word(uint64_t w) { h_ = (h_ ^ w) * 0x100000001b3ULL; }
  void text(const std::string& s) {
    word(s.size());
    raw(s.data(), s.size());
  }
  void bytes(const void* data, size_t n) {  // length-prefixed
    word(n);
    raw(data, n);
  }
  std::string hex() const { return fmt::format("{:016x}", h_); }

 private:
  void raw(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      word(w);
    }
    for (; i < n; ++i) word(p[i]);
  }
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

}  // namespace tapegrad::io
