// same_bits.h — bit-for-bit comparison of two tensors (any dtype, device and layout), for the tests whose claim
// is "the same bits" (an in-place or captured path against the plain one), not "close".
#pragma once
#include <vector>

#include "autograd/tapegrad.h"

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

}  // namespace tapegrad::testing
