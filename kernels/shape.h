// shape.h — Shape: a small inline vector of dimensions (or strides), at most kMaxDims.
// Shapes live on the stack: creating a tensor never allocates for its shape, which keeps
// the per-op overhead of the tape low. Also broadcasting and contiguous-stride helpers.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/error.h"

namespace tapegrad {

inline constexpr int kMaxDims = 8;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  explicit Shape(const std::vector<int64_t>& dims) { assign(dims.begin(), dims.end()); }
  template <class It>
  Shape(It first, It last) { assign(first, last); }

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t& operator[](int i) { return d_[i]; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t* begin() { return d_.data(); }
  int64_t* end() { return d_.data() + n_; }
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + n_; }
  int64_t back() const { return d_[n_ - 1]; }
  void push_back(int64_t v) {
    TG_CHECK(n_ < kMaxDims, "shape: more than {} dimensions are not supported", kMaxDims);
    d_[n_++] = v;
  }
  void insert(int pos, int64_t v) {
    TG_CHECK(n_ < kMaxDims, "shape: more than {} dimensions are not supported", kMaxDims);
    for (int i = n_; i > pos; --i) d_[i] = d_[i - 1];
    d_[pos] = v;
    ++n_;
  }
  void erase(int pos) {
    for (int i = pos; i + 1 < n_; ++i) d_[i] = d_[i + 1];
    --n_;
  }
  void resize(int n, int64_t fill = 0) {
    TG_CHECK(n >= 0 && n <= kMaxDims, "shape: more than {} dimensions are not supported", kMaxDims);
    for (int i = n_; i < n; ++i) d_[i] = fill;
    n_ = n;
  }
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  int64_t numel() const {
    int64_t p = 1;
    for (int i = 0; i < n_; ++i) p *= d_[i];
    return p;
  }
  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.n_ != b.n_) return false;
    for (int i = 0; i < a.n_; ++i)
      if (a.d_[i] != b.d_[i]) return false;
    return true;
  }
  std::string str() const;  // "[2, 3]"

 private:
  template <class It>
  void assign(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }
  std::array<int64_t, kMaxDims> d_;  // only the first n_ are meaningful (left uninitialized: hot path)
  int n_ = 0;
};

// Row-major strides of a contiguous tensor of this shape (in elements).
Shape contiguous_strides(const Shape& shape);
// NumPy broadcasting of two shapes; throws naming `op` when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Strides that view a tensor of shape `from` (with `strides`) as broadcast to `to`:
// new leading dims and expanded size-1 dims get stride 0.
Shape broadcast_strides(const Shape& from, const Shape& strides, const Shape& to);
// Wraps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int wrap_dim(int64_t dim, int ndim, const char* op);

}  // namespace tapegrad

template <>
struct fmt::formatter<tapegrad::Shape> : fmt::formatter<std::string> {
  auto format(const tapegrad::Shape& s, format_context& ctx) const {
    return fmt::formatter<std::string>::format(s.str(), ctx);
  }
};
