// bf16_bits.h — the raw bits of a bfloat16 tensor, for the tests that compare bf16 results bit for bit.
#pragma once
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"

namespace tapegrad::testing {

// A bfloat16 tensor's raw bits (any device, any layout), in row-major order of its shape.
inline std::vector<uint16_t> bits_of(const Tensor& t) {
  REQUIRE(t.dtype() == kBFloat16);
  const Tensor c = t.to(kCPU).contiguous();
  std::vector<uint16_t> out(static_cast<size_t>(c.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = c.data<bfloat16>()[i].bits;
  return out;
}

}  // namespace tapegrad::testing
