// inline_vector.h — a fixed-size array that lives inside its owner when it has at most N
// elements (every op but cat), so recording a tape entry makes no extra allocation for it.
#pragma once
#include <array>
#include <cstddef>
#include <span>
#include <vector>

namespace tapegrad {

template <class T, size_t N>
class InlineVector {
 public:
  explicit InlineVector(size_t n) : n_(n) {
    if (n > N) heap_.resize(n);
  }
  size_t size() const { return n_; }
  T* data() { return n_ > N ? heap_.data() : inline_.data(); }
  const T* data() const { return n_ > N ? heap_.data() : inline_.data(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T* begin() { return data(); }
  T* end() { return data() + n_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + n_; }
  operator std::span<T>() { return {data(), n_}; }
  operator std::span<const T>() const { return {data(), n_}; }

 private:
  std::array<T, N> inline_{};
  std::vector<T> heap_;
  size_t n_;
};

}  // namespace tapegrad
