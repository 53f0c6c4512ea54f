// exact_number.h — numbers as text that read back to the same bits (checkpoint metadata, configs):
// format_exact writes fmt's shortest round-trip form; parse_exact reads all of a string with
// std::from_chars (correctly rounded), false when anything is left over or out of range.
#pragma once
#include <charconv>
#include <string>
#include <system_error>

#include <fmt/format.h>

namespace tapegrad {

inline std::string format_exact(double v) { return fmt::format("{}", v); }

template <class T>
bool parse_exact(const std::string& s, T& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end;
}

}  // namespace tapegrad
