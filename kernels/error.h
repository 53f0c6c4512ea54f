// error.h — the one exception type of tapegrad. Every message names the op and the
// shapes/dtypes/indices involved, e.g. "matmul: inner dimensions differ: [2, 3] @ [4, 5]".
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace tapegrad {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// TG_CHECK(cond, "op: message {} {}", args...) throws tapegrad::Error when cond is false.
#define TG_CHECK(cond, ...)                                        \
  do {                                                             \
    if (!(cond)) throw ::tapegrad::Error(::fmt::format(__VA_ARGS__)); \
  } while (0)

}  // namespace tapegrad
