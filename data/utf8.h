// utf8.h — UTF-8 validation helpers: replace invalid sequences with U+FFFD the way Python's
// bytes.decode("utf-8", errors="replace") does (one U+FFFD per maximal invalid subpart).
#pragma once
#include <string>
#include <string_view>

namespace tapegrad::data {

// Length of the valid UTF-8 sequence starting at bytes[i], or 0 when it is invalid there.
size_t valid_utf8_sequence_length(std::string_view bytes, size_t i);
// Length of the maximal subpart of an ill-formed sequence at bytes[i] (>= 1), per Unicode §3.9.
size_t invalid_utf8_subpart_length(std::string_view bytes, size_t i);
// `bytes` with every ill-formed subpart replaced by U+FFFD (EF BF BD).
std::string replace_invalid_utf8(std::string_view bytes);

}  // namespace tapegrad::data
