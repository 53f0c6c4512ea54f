// same_bits.h — bit-for-bit comparison of two tensors (any dtype, device and layout), for the tests whose claim
// is "the same bits" (an in-place or captured path against the plain one), not "close".
#pragma once
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"

namespace tapegrad::testing {

// The bytes of t's elements in row-major order (a contiguous CPU copy): equal bytes = bitwise equal.
inline std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor c = t.detach().to(kCPU).contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  return std::vector<unsigned char>(p, p + c.numel() * static_cast<int64_t>(dtype_size(c.dtype())));
}

// a and b have the same shape, dtype and bits (NaN payloads and signs of zero included).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && bytes_of(a) == bytes_of(b);
}

// How many elements of a and b (same shape and dtype, else the test stops) differ in any bit: 0 is "bitwise
// equal", and the count says how far from it a failure is.
inline int64_t elements_differing(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  REQUIRE(a.dtype() == b.dtype());
  const std::vector<unsigned char> x = bytes_of(a), y = bytes_of(b);
  const size_t es = dtype_size(a.dtype());
  int64_t n = 0;
  for (size_t i = 0; i < x.size(); i += es) n += std::memcmp(&x[i], &y[i], es) != 0 ? 1 : 0;
  return n;
}

}  // namespace tapegrad::testing
