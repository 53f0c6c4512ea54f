// byte_unicode.cpp — the GPT-2 bytes_to_unicode table and its inverse.
#include "data/byte_unicode.h"

#include <array>

#include "kernels/error.h"

namespace tapegrad::data {
namespace {

bool is_printable_byte(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

// byte -> code point, exactly as GPT-2's bytes_to_unicode().
const std::array<char32_t, 256>& byte_to_codepoint() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = is_printable_byte(b) ? char32_t(b) : next++;
    return t;
  }();
  return table;
}

// code point (< 0x200) -> byte, or -1.
const std::array<int, 512>& codepoint_to_byte() {
  static const std::array<int, 512> table = [] {
    std::array<int, 512> t{};
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byte_to_codepoint()[b]] = b;
    return t;
  }();
  return table;
}

void append_utf8(std::string& out, char32_t cp) {  // cp < 0x800 here
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

std::string bytes_to_gpt2_unicode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, byte_to_codepoint()[b]);
  return out;
}

std::string gpt2_unicode_to_bytes(std::string_view text, std::string_view what) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto c0 = static_cast<unsigned char>(text[i]);
    char32_t cp;
    if (c0 < 0x80) {
      cp = c0;
      i += 1;
    } else if ((c0 & 0xE0) == 0xC0 && i + 1 < text.size() &&
               (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
      cp = char32_t((c0 & 0x1F) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3F);
      i += 2;
    } else {
      throw Error(fmt::format("{}: byte offset {}: character outside the GPT-2 byte alphabet (byte 0x{:02x})", what,
                              i, c0));
    }
    const int b = cp < 512 ? codepoint_to_byte()[cp] : -1;
    TG_CHECK(b >= 0, "{}: byte offset {}: U+{:04X} is not in the GPT-2 byte alphabet", what, i, uint32_t(cp));
    out.push_back(char(b));
  }
  return out;
}

}  // namespace tapegrad::data
