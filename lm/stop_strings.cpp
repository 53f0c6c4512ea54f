// stop_strings.cpp — the first stop string in a stream of bytes (see stop_strings.h).
#include "lm/stop_strings.h"

#include <algorithm>
#include <utility>

#include "kernels/error.h"

namespace tapegrad::lm {

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const std::string& s : stops_) TG_CHECK(!s.empty(), "--stop: a stop string must not be empty");
}

std::string StopStrings::push(std::string_view bytes) {
  if (stopped_) return {};
  held_ += bytes;
  if (stops_.empty()) return std::exchange(held_, {});
  size_t first = std::string::npos;  // the earliest match of any stop string
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // The longest tail of held_ that begins some stop string (shorter than it: no match was found).
  size_t keep = 0;
  for (const std::string& s : stops_)
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
      if (std::string_view(held_).substr(held_.size() - n) == std::string_view(s).substr(0, n)) {
        keep = n;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStrings::finish() {
  std::string out = stopped_ ? std::string() : std::exchange(held_, {});
  reset();
  return out;
}

void StopStrings::reset() {
  held_.clear();
  stopped_ = false;
}

}  // namespace tapegrad::lm
