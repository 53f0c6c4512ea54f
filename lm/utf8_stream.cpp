// utf8_stream.cpp — incremental UTF-8 replacement over data/utf8.h (see utf8_stream.h).
//
// Why holding back only the tail is exact: data::replace_invalid_utf8 walks the bytes and at each
// step either copies a whole valid sequence or replaces a maximal invalid subpart (a valid lead
// byte followed by the continuation bytes Table 3-7 allows, or one byte). That decision reads only
// the bytes of the step and the one after it, so it is final as soon as that byte is known — except
// for a step that reaches the end of what has arrived while its bytes are still a valid prefix of
// a sequence: the next push may complete it. Such a tail starts at a lead byte C2..F4, which no step
// swallows as a continuation, so it is found by looking at the last 3 bytes alone.
#include "lm/utf8_stream.h"

#include "data/utf8.h"

namespace tapegrad::lm {
namespace {

bool is_lead_byte(unsigned char b) { return b >= 0xC2 && b <= 0xF4; }

// Where the incomplete trailing sequence of `bytes` starts (bytes.size() when there is none).
size_t incomplete_tail_start(std::string_view bytes) {
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t i = n - back;
    if (!is_lead_byte(static_cast<unsigned char>(bytes[i]))) continue;
    // The last lead byte decides: a valid prefix that runs to the end, or nothing held back.
    const bool incomplete = data::valid_utf8_sequence_length(bytes, i) == 0 &&
                            data::invalid_utf8_subpart_length(bytes, i) == back;
    return incomplete ? i : n;
  }
  return n;
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  std::string joined;
  std::string_view all = bytes;
  if (!pending_.empty()) {
    joined.reserve(pending_.size() + bytes.size());
    joined.append(pending_).append(bytes);
    all = joined;
  }
  const size_t cut = incomplete_tail_start(all);
  std::string out = data::replace_invalid_utf8(all.substr(0, cut));
  pending_.assign(all.substr(cut));
  return out;
}

std::string Utf8Stream::finish() {
  std::string out = data::replace_invalid_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace tapegrad::lm
