// exact_number.h — numbers as text that read back to the same bits (checkpoint metadata, configs):
// format_exact writes fmt's shortest round-trip form; parse_exact reads all of a string with
// std::from_chars (correctly rounded), false when anything is left over or out of range.
// parse_number is THE checked parser of numbers read from files (checkpoint and int8-model metadata,
// run records, JSON strings): the value, or a tapegrad::Error naming the field and the value — never
// std::invalid_argument / std::out_of_range as std::stoull & co throw. "", "12x", " 1", "+1", "-1"
// for an unsigned type and anything beyond the type's range (2^70) are refused.
#pragma once
#include <charconv>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include <fmt/format.h>

#include "kernels/error.h"

namespace tapegrad {

inline std::string format_exact(double v) { return fmt::format("{}", v); }

template <class T>
bool parse_exact(const std::string& s, T& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end;
}

// `what` names the field, e.g. "checkpoint 'run/ckpt.safetensors': config.vocab_size"; the error reads
// "<what> = '<value>' is not a valid number" (for integers: "(an integer from <min> to <max>)").
template <class T>
T parse_number(const std::string& s, std::string_view what) {
  T v{};
  if (parse_exact(s, v)) return v;
  const std::string shown = s.size() > 64 ? s.substr(0, 64) + "…" : s;
  if constexpr (std::is_integral_v<T>)
    throw Error(fmt::format("{} = '{}' is not a valid number (an integer from {} to {})", what, shown,
                            std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  else
    throw Error(fmt::format("{} = '{}' is not a valid number", what, shown));
}

}  // namespace tapegrad
