// utf8.cpp — UTF-8 well-formedness (Unicode Table 3-7) and U+FFFD replacement.
#include "data/utf8.h"

namespace tapegrad::data {
namespace {

// Allowed range of the second byte after lead byte `lead` (Table 3-7), and sequence length.
struct LeadInfo {
  size_t length;  // 0: not a valid lead byte
  unsigned char second_lo, second_hi;
};

LeadInfo lead_info(unsigned char lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Number of leading bytes at i that form a valid prefix of a sequence (>= 1 when the lead is valid).
size_t valid_prefix_length(std::string_view s, size_t i, const LeadInfo& info) {
  size_t n = 1;
  if (info.length == 1) return 1;
  if (i + 1 >= s.size()) return n;
  const auto b1 = static_cast<unsigned char>(s[i + 1]);
  if (b1 < info.second_lo || b1 > info.second_hi) return n;
  ++n;
  while (n < info.length && i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
  return n;
}

}  // namespace

size_t valid_utf8_sequence_length(std::string_view bytes, size_t i) {
  const LeadInfo info = lead_info(static_cast<unsigned char>(bytes[i]));
  if (info.length == 0) return 0;
  return valid_prefix_length(bytes, i, info) == info.length ? info.length : 0;
}

size_t invalid_utf8_subpart_length(std::string_view bytes, size_t i) {
  const LeadInfo info = lead_info(static_cast<unsigned char>(bytes[i]));
  if (info.length == 0) return 1;
  return valid_prefix_length(bytes, i, info);
}

std::string replace_invalid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    if (const size_t n = valid_utf8_sequence_length(bytes, i)) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += invalid_utf8_subpart_length(bytes, i);
    }
  }
  return out;
}

}  // namespace tapegrad::data
