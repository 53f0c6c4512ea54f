// fast_math.h — float32 exp and tanh written as straight-line code the compiler vectorizes
// (libm's expf/tanhf are scalar calls: they made a 64-element tanh cost more than the whole
// tape machinery around it, and they cap softmax far below memory bandwidth).
//
// exp: x = n·ln2 + r with n = round(x·log₂e), |r| ≤ ln2/2 (ln2 split in a high and a low part so
// r is exact); eʳ by a degree-6 polynomial (Cephes' expf coefficients); 2ⁿ applied as two
// factors 2^(n/2)·2^(n−n/2), so results in the denormal range come out right instead of flushing.
// tanh: x + x³·P(x²) for |x| < 0.625 (Cephes' tanhf), else sign(x)·(1 − 2/(e^(2|x|) + 1)).
// Both are within a few ulp of libm over the whole float range (tests/test_fast_math.cpp) and
// propagate NaN and ±inf. float64 keeps libm everywhere (gradcheck needs its precision).
#pragma once
#include <cstring>
#include <cstdint>
#include <limits>

namespace tapegrad::kernels {

// The float with these bits (std::bit_cast without C++20: nvcc compiles this header as C++17).
inline float bits_to_float(int32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline float fast_exp(float x) {
  const float hi = 88.72283935546875f, lo = -104.0f;  // e^hi ≈ FLT_MAX, e^lo < smallest denormal
  // NaN goes to lo here (then comes back as NaN at the end): converting a NaN n to int would be undefined.
  const float xc = x > hi ? hi : (x >= lo ? x : lo);
  // round to nearest by adding and subtracting 1.5·2²³ (floorf does not vectorize under the
  // default -ftrapping-math); exact for |x·log₂e| < 2²²
  const float n = (xc * 1.44269504088896341f + 0x1.8p23f) - 0x1.8p23f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * z + r + 1.0f;
  const int32_t ni = static_cast<int32_t>(n), n1 = ni >> 1, n2 = ni - n1;  // n1, n2 in [−75, 64]
  const float s1 = bits_to_float((n1 + 127) << 23), s2 = bits_to_float((n2 + 127) << 23);
  float result = y * s1 * s2;
  result = x > hi ? std::numeric_limits<float>::infinity() : result;
  result = x < lo ? 0.0f : result;
  return x != x ? x : result;
}

inline float fast_tanh(float x) {
  const float ax = x < 0.0f ? -x : x;
  // small |x|: x + x³·P(x²)
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  // large |x|: 1 − 2/(e^(2|x|) + 1), with x's sign
  const float big = 1.0f - 2.0f / (fast_exp(2.0f * ax) + 1.0f);
  const float signed_big = x < 0.0f ? -big : big;
  return ax < 0.625f ? small : signed_big;
}

}  // namespace tapegrad::kernels
