// bfloat16.h — the 16-bit brain float: the top half of a float32 (1 sign, 8 exponent, 7 mantissa
// bits). Same range as float32, 8 significant bits (about 2–3 decimal digits: relative spacing 2⁻⁷ =
// 0.0078). Used for storage only: every op widens to float32, computes, and rounds back.
//
// float32 → bfloat16 rounds to nearest, ties to even (as torch, numpy's ml_dtypes and CUDA's
// __float2bfloat16 do):   bits16 = (bits32 + 0x7FFF + ((bits32 >> 16) & 1)) >> 16
// Overflow rounds to ±infinity (3.4e38 is near the top of both formats). NaN rule: a NaN stays a
// NaN — the result is the quiet NaN 0x7FC0 with the input's sign (the rounding formula above could
// carry a NaN whose payload sits in the low 16 bits into infinity, so NaNs are handled first).
// bfloat16 → float32 is exact: the 16 bits become the high half, the low half is zero.
//
// Compiled by the C++ compiler, by nvcc (C++17: kernels/cuda/) and as host code on HIP-CPU.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TG_HOST_DEVICE __host__ __device__
#else
#define TG_HOST_DEVICE
#endif

namespace tapegrad {

TG_HOST_DEVICE inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
TG_HOST_DEVICE inline float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The bfloat16 bits nearest to f (ties to even); NaN → quiet NaN of the same sign.
TG_HOST_DEVICE inline uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7FC0u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
TG_HOST_DEVICE inline float bfloat16_bits_to_float(uint16_t b) { return float_from_bits(static_cast<uint32_t>(b) << 16); }

// A bfloat16 value: converts to float implicitly (so comparisons and arithmetic happen in float32) and
// from float explicitly (every narrowing is visible in the code).
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  TG_HOST_DEVICE explicit bfloat16(float f) : bits(float_to_bfloat16_bits(f)) {}
  TG_HOST_DEVICE operator float() const { return bfloat16_bits_to_float(bits); }
  TG_HOST_DEVICE static bfloat16 from_bits(uint16_t b) {
    bfloat16 v;
    v.bits = b;
    return v;
  }
};
static_assert(sizeof(bfloat16) == 2, "bfloat16 is stored in two bytes");

}  // namespace tapegrad
