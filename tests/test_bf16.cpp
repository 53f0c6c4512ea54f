// test_bf16.cpp — bfloat16 the type (kernels/bfloat16.h) and as a Tensor dtype.
//
//  * float32 → bfloat16 against an independent reference written here in double arithmetic: the two
//    neighbouring bfloat16 values of x (the grid spacing is 2^(e−7) for 2^e ≤ |x| < 2^(e+1), and 2^−133
//    below the smallest normal), the nearer one, ties to the even mantissa, past the largest finite
//    value (0x7F7F) → ±inf, the sign kept (also on ±0 and underflow). Checked for every one of the 65536
//    high halves × a set of low halves (exact ties 0x8000, one below and above, 0, 1, 0xFFFF, …), on the
//    struct and through a Tensor's conversion (the copy kernel). NaN → the quiet NaN 0x7FC0 with the
//    input's sign, also a NaN whose payload sits only in the low half (which plain rounding would carry
//    into inf).
//  * bfloat16 → float32 is exact for all 65536 patterns (the bits become the high half).
//  * The dtype on Tensors: printing, to(kBFloat16)/to(kFloat32) and their backward, factories, item(),
//    requires_grad, and the safetensors BF16 round trip (bit for bit, the file says "BF16").
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/io/safetensors.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "bf16_bits.h"
#include "kernels/bfloat16.h"
#include "kernels/error.h"
#include "test_data_helpers.h"

using namespace tapegrad;
using testing::bits_of;

namespace {

// The reference rounding of a finite float to bfloat16 bits, in double arithmetic (no bit tricks).
uint16_t reference_bf16_bits(float f) {
  const double x = std::fabs(static_cast<double>(f));
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (x == 0.0) return sign;
  // Exponent of x's binade, clamped at the smallest normal (−126): subnormals share its spacing.
  const int e = std::max(std::ilogb(x), -126);
  const double spacing = std::ldexp(1.0, e - 7);  // 8 significant bits (7 stored)
  const double lower_units = std::floor(x / spacing);
  const double lower = lower_units * spacing, upper = lower + spacing;
  double r;
  if (x - lower < upper - x) r = lower;
  else if (x - lower > upper - x) r = upper;
  else r = std::fmod(lower_units, 2.0) == 0.0 ? lower : upper;  // a tie: the even mantissa
  const double largest = std::ldexp(255.0, 127 - 7);            // 0x7F7F = (2 − 2⁻⁷)·2¹²⁷
  if (r > largest) return static_cast<uint16_t>(sign | 0x7F80);  // overflow → inf
  const float rf = static_cast<float>(r);                        // exact: r is on the bfloat16 grid
  uint32_t u;
  std::memcpy(&u, &rf, sizeof u);
  REQUIRE((u & 0xFFFFu) == 0);  // the reference really produced a bfloat16 value
  return static_cast<uint16_t>(sign | (u >> 16));
}

float float_of(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

bool is_nan_bits(uint32_t bits) { return (bits & 0x7FFFFFFFu) > 0x7F800000u; }

// The low halves combined with every high half: exact ties, their neighbours, the ends, and a few others.
constexpr uint32_t kLowHalves[] = {0x0000, 0x0001, 0x3FFF, 0x4000, 0x7FFE, 0x7FFF, 0x8000,
                                   0x8001, 0x8002, 0xBFFF, 0xC000, 0xFFFE, 0xFFFF, 0x1234};

// A CPU bfloat16 tensor holding the given bit patterns.
Tensor bf16_from_bits(const std::vector<uint16_t>& bits, const Shape& shape) {
  Tensor t = empty(shape, Options(kBFloat16));
  REQUIRE(static_cast<int64_t>(bits.size()) == t.numel());
  for (size_t i = 0; i < bits.size(); ++i) t.data<bfloat16>()[i] = bfloat16::from_bits(bits[i]);
  return t;
}

}  // namespace

TEST_CASE("bf16: the reference rounding itself is right on hand-worked values", "[bf16]") {
  // So that a wrong reference cannot make the exhaustive check below pass or fail for the wrong reason.
  CHECK(reference_bf16_bits(1.0f) == 0x3F80);
  CHECK(reference_bf16_bits(float_of(0x3F808000)) == 0x3F80);  // 1 + 2⁻⁸: a tie, 0x3F80 is even
  CHECK(reference_bf16_bits(float_of(0x3F818000)) == 0x3F82);  // 1 + 3·2⁻⁸: a tie, up to the even 0x3F82
  CHECK(reference_bf16_bits(float_of(0x3F808001)) == 0x3F81);  // just above the tie
  CHECK(reference_bf16_bits(float_of(0x3F807FFF)) == 0x3F80);  // just below
  CHECK(reference_bf16_bits(-2.0f) == 0xC000);
  CHECK(reference_bf16_bits(-0.0f) == 0x8000);
  CHECK(reference_bf16_bits(float_of(0x00000001)) == 0x0000);  // the smallest subnormal underflows to +0
  CHECK(reference_bf16_bits(float_of(0x80008000)) == 0x8000);  // a subnormal tie to −0 (even)
  CHECK(reference_bf16_bits(float_of(0x00018000)) == 0x0002);  // a subnormal tie up to the even 0x0002
  CHECK(reference_bf16_bits(float_of(0x7F7F7FFF)) == 0x7F7F);  // stays the largest finite value
  CHECK(reference_bf16_bits(float_of(0x7F7F8000)) == 0x7F80);  // the tie above it → inf
  CHECK(reference_bf16_bits(float_of(0xFF7FFFFF)) == 0xFF80);  // −FLT_MAX → −inf
}

TEST_CASE("bf16: float32 → bfloat16 rounds to nearest even for every high half × tie-revealing low halves",
          "[bf16]") {
  int64_t checked = 0, wrong = 0, nan_checked = 0;
  std::vector<float> inputs;
  std::vector<uint16_t> expected;
  for (uint32_t hi = 0; hi < 0x10000; ++hi) {
    for (uint32_t lo : kLowHalves) {
      const uint32_t u = (hi << 16) | lo;
      const float f = float_of(u);
      const uint16_t got = bfloat16(f).bits;
      uint16_t want;
      if (is_nan_bits(u)) {
        want = static_cast<uint16_t>((u >> 16 & 0x8000u) | 0x7FC0u);  // quiet NaN, the sign kept
        ++nan_checked;
      } else if (std::isinf(f)) {
        want = static_cast<uint16_t>(u >> 16);  // ±inf stays ±inf
      } else {
        want = reference_bf16_bits(f);
      }
      if (got != want && wrong++ < 5)
        FAIL_CHECK(fmt::format("float bits {:#010x}: bfloat16 gave {:#06x}, the reference {:#06x}", u, got, want));
      ++checked;
      inputs.push_back(f);
      expected.push_back(want);
    }
  }
  CHECK(wrong == 0);
  CHECK(checked == 65536 * static_cast<int64_t>(std::size(kLowHalves)));
  CHECK(nan_checked > 0);

  // The same conversion through a Tensor (the CPU copy kernel), every value at once.
  const int64_t n = static_cast<int64_t>(inputs.size());
  const Tensor f32 = from_vector<float>(inputs, {n});
  const std::vector<uint16_t> got = bits_of(f32.to(kBFloat16));
  int64_t tensor_wrong = 0;
  for (int64_t i = 0; i < n; ++i)
    if (got[i] != expected[i] && tensor_wrong++ < 5)
      FAIL_CHECK(fmt::format("Tensor::to(kBFloat16) of float bits {:#010x}: {:#06x}, want {:#06x}",
                             std::bit_cast<uint32_t>(inputs[i]), got[i], expected[i]));
  CHECK(tensor_wrong == 0);
}

TEST_CASE("bf16: the special values and the NaN rule", "[bf16]") {
  CHECK(bfloat16(0.0f).bits == 0x0000);
  CHECK(bfloat16(-0.0f).bits == 0x8000);
  CHECK(bfloat16(INFINITY).bits == 0x7F80);
  CHECK(bfloat16(-INFINITY).bits == 0xFF80);
  CHECK(bfloat16(3.4028234663852886e38f).bits == 0x7F80);  // FLT_MAX overflows to inf
  CHECK(bfloat16(-3.4028234663852886e38f).bits == 0xFF80);
  CHECK(bfloat16(float_of(0x7F7F7FFF)).bits == 0x7F7F);    // the largest bfloat16 below the tie stays finite
  CHECK(bfloat16(float_of(0x00000001)).bits == 0x0000);    // the smallest float subnormal underflows
  CHECK(bfloat16(float_of(0x80000001)).bits == 0x8000);    // … to −0 when negative
  CHECK(bfloat16(float_of(0x00010000)).bits == 0x0001);    // the smallest bfloat16 subnormal is exact
  // NaN: the quiet NaN 0x7FC0 with the input's sign, whatever the payload.
  CHECK(bfloat16(std::nanf("")).bits == 0x7FC0);
  CHECK(bfloat16(-std::nanf("")).bits == 0xFFC0);
  CHECK(bfloat16(float_of(0x7F800001)).bits == 0x7FC0);  // payload only in the low half: plain rounding gives inf
  CHECK(bfloat16(float_of(0xFF80FFFF)).bits == 0xFFC0);  // plain rounding: 0xFF81, a signalling NaN
  CHECK(bfloat16(float_of(0x7FFFFFFF)).bits == 0x7FC0);  // plain rounding carries this one into 0x8000 (−0)
}

TEST_CASE("bf16: bfloat16 → float32 is exact for all 65536 patterns", "[bf16]") {
  std::vector<uint16_t> all(65536);
  for (uint32_t b = 0; b < 65536; ++b) {
    all[b] = static_cast<uint16_t>(b);
    const float f = bfloat16::from_bits(static_cast<uint16_t>(b));
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if (u != b << 16) FAIL_CHECK(fmt::format("bits {:#06x} widened to {:#010x}", b, u));
    // And back: every value (NaNs aside) narrows to itself.
    if (!std::isnan(f) && bfloat16(f).bits != b) FAIL_CHECK(fmt::format("bits {:#06x} did not round trip", b));
  }
  // Through Tensors: to(kFloat32) widens bit for bit, to(kFloat64) keeps the value (NaN stays NaN).
  const Tensor t = bf16_from_bits(all, {65536});
  const std::vector<float> f32 = t.to(kFloat32).to_vector<float>();
  const std::vector<double> f64 = t.to(kFloat64).to_vector<double>();
  int64_t wrong = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const float want = float_of(b << 16);
    const bool same32 = std::bit_cast<uint32_t>(f32[b]) == b << 16;
    const bool same64 = std::isnan(want) ? std::isnan(f64[b]) : f64[b] == static_cast<double>(want);
    if (!(same32 && same64) && wrong++ < 5)
      FAIL_CHECK(fmt::format("bits {:#06x}: to(float32) {} to(float64) {}", b, f32[b], f64[b]));
  }
  CHECK(wrong == 0);
  // And every non-NaN pattern survives bfloat16 → float32 → bfloat16 on Tensors.
  const std::vector<uint16_t> back = bits_of(t.to(kFloat32).to(kBFloat16));
  for (uint32_t b = 0; b < 65536; ++b)
    if (!std::isnan(float_of(b << 16)) && back[b] != b) FAIL_CHECK(fmt::format("Tensor round trip of {:#06x}", b));
}

TEST_CASE("bf16: a bfloat16 tensor prints its rounded values with dtype=bfloat16", "[bf16]") {
  const Tensor t = tensor({1.01, -2.0, 0.1}, Options(kBFloat16));
  CHECK(t.dtype() == kBFloat16);
  CHECK(dtype_size(t.dtype()) == 2);
  // 1.01 → 1.0078125, 0.1 → 0.10009765625 (bfloat16's nearest values), printed to 4 decimals.
  CHECK(t.str() == "tensor([1.0078, -2.0000, 0.1001], dtype=bfloat16)");
  CHECK(fmt::format("{}", t) == t.str());
  CHECK(std::string(dtype_name(kBFloat16)) == "bfloat16");
  const Tensor special = bf16_from_bits({0x7F80, 0xFF80, 0x7FC0}, {3});
  CHECK(special.str() == "tensor([inf, -inf, nan], dtype=bfloat16)");
}

TEST_CASE("bf16: to(kBFloat16) and to(kFloat32) differentiate back to the source dtype", "[bf16]") {
  SECTION("float32 → bfloat16: the gradient arrives widened, as float32") {
    const Tensor x = tensor({0.3, -1.7, 2.2}, Options(kFloat32).requires_grad());
    const Tensor y = x.to(kBFloat16);
    CHECK(y.dtype() == kBFloat16);
    CHECK(y.requires_grad());
    const Tensor g = tensor({0.5, 1.01, -3.0}, Options(kBFloat16));  // 1.01 is 1.0078125 in bfloat16
    y.backward(g);
    REQUIRE(x.grad().defined());
    CHECK(x.grad().dtype() == kFloat32);
    CHECK(x.grad().to_vector<float>() == std::vector<float>{0.5f, 1.0078125f, -3.0f});
    CHECK(y.to_vector<float>() == std::vector<float>{float(bfloat16(0.3f)), float(bfloat16(-1.7f)), 2.203125f});
  }
  SECTION("bfloat16 → float32: the gradient is rounded to bfloat16") {
    const Tensor x = tensor({1.5, -0.25}, Options(kBFloat16).requires_grad());
    const Tensor y = x.to(kFloat32);
    CHECK(y.dtype() == kFloat32);
    CHECK(y.to_vector<float>() == std::vector<float>{1.5f, -0.25f});
    y.backward(from_vector<float>({1.01f, 3.0f}, {2}));
    REQUIRE(x.grad().defined());
    CHECK(x.grad().dtype() == kBFloat16);
    CHECK(bits_of(x.grad()) == std::vector<uint16_t>{bfloat16(1.01f).bits, bfloat16(3.0f).bits});
  }
  SECTION("bfloat16 → float64 → bfloat16 inside a computation: a chain of conversions") {
    const Tensor x = tensor({0.75, -1.25}, Options(kBFloat16).requires_grad());
    const Tensor y = (x.to(kFloat64) * 3.0).to(kBFloat16);  // 2.25, −3.75: exact in bfloat16
    CHECK(y.dtype() == kBFloat16);
    CHECK(y.to_vector<double>() == std::vector<double>{2.25, -3.75});
    sum(y).backward();
    CHECK(x.grad().dtype() == kBFloat16);
    CHECK(x.grad().to_vector<double>() == std::vector<double>{3.0, 3.0});
  }
}

TEST_CASE("bf16: factories and item() in bfloat16", "[bf16]") {
  const Tensor z = zeros({2, 3}, kBFloat16), o = ones({4}, kBFloat16), f = full({3}, 3.3, kBFloat16);
  CHECK(z.dtype() == kBFloat16);
  CHECK(o.dtype() == kBFloat16);
  CHECK(f.dtype() == kBFloat16);
  CHECK(bits_of(z) == std::vector<uint16_t>(6, 0x0000));
  CHECK(bits_of(o) == std::vector<uint16_t>(4, 0x3F80));
  CHECK(bits_of(f) == std::vector<uint16_t>(3, bfloat16(3.3f).bits));  // 3.296875
  CHECK(bits_of(full({1}, -1e39, kBFloat16)) == std::vector<uint16_t>{0xFF80});  // beyond the range → −inf

  // randn / rand draw the same numbers as in float32, rounded once.
  Generator g1(11), g2(11), g3(12), g4(12);
  CHECK(bits_of(randn({64}, Options(kBFloat16), &g1)) == bits_of(randn({64}, Options(kFloat32), &g2).to(kBFloat16)));
  CHECK(bits_of(rand({64}, Options(kBFloat16), &g3)) == bits_of(rand({64}, Options(kFloat32), &g4).to(kBFloat16)));

  CHECK(full({}, 2.5, kBFloat16).item() == 2.5);
  CHECK(full({}, 0.1, kBFloat16).item() == static_cast<double>(static_cast<float>(bfloat16(0.1f))));
  CHECK(full({1, 1}, -7.0, kBFloat16).item<float>() == -7.0f);
  CHECK(std::isnan(bf16_from_bits({0x7FC0}, {}).item()));
}

TEST_CASE("bf16: bfloat16 tensors require grad and receive bfloat16 gradients", "[bf16]") {
  Generator gen(5);
  const Tensor x = randn({3, 4}, Options(kBFloat16).requires_grad(), &gen);
  CHECK(x.requires_grad());
  const Tensor y = sum(x * x);
  CHECK(y.dtype() == kBFloat16);
  y.backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == kBFloat16);
  // d/dx Σx² = 2x: exact in bfloat16 (a doubling).
  CHECK(bits_of(x.grad()) == bits_of(x.detach() * 2.0));
  // An integer tensor still cannot require grad; the message names the floating dtypes.
  CHECK_THROWS_WITH(zeros({2}, kInt64).requires_grad_(), Catch::Contains("bfloat16"));
}

TEST_CASE("bf16: safetensors saves bfloat16 as BF16 and loads it back bit for bit", "[bf16]") {
  data::testing::ScratchDir dir("bf16_safetensors");
  const std::string path = dir.file("bf16.safetensors");
  // Every kind of value: normal, ±0, subnormal, the largest, ±inf, NaNs (the payload must survive too:
  // the file is storage, nothing is rounded).
  const std::vector<uint16_t> bits = {0x3F80, 0xBF81, 0x0000, 0x8000, 0x0001, 0x807F, 0x7F7F,
                                      0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x4049};
  const Tensor a = bf16_from_bits(bits, {2, 7});
  const Tensor b_t = bf16_from_bits({0x1111, 0x2222, 0x3333, 0x4444, 0x5555, 0x6666}, {3, 2}).t();  // strided
  save_safetensors(path, {{"a", a}, {"b", b_t}, {"f", ones({2}, kFloat32)}});

  SafetensorsFile file(path);
  std::map<std::string, std::string> dtypes;
  for (const SafetensorsEntry& e : file.entries()) dtypes[e.name] = e.dtype;
  CHECK(dtypes.at("a") == "BF16");
  CHECK(dtypes.at("b") == "BF16");
  CHECK(dtypes.at("f") == "F32");
  for (const SafetensorsEntry& e : file.entries())
    if (e.name != "f") CHECK(e.end - e.begin == 2 * static_cast<uint64_t>(e.numel()));  // two bytes each

  const auto loaded = load_safetensors(path);
  REQUIRE(loaded.at("a").dtype() == kBFloat16);
  CHECK(loaded.at("a").shape() == Shape{2, 7});
  CHECK(bits_of(loaded.at("a")) == bits);
  REQUIRE(loaded.at("b").dtype() == kBFloat16);
  CHECK(loaded.at("b").shape() == Shape{2, 3});
  CHECK(bits_of(loaded.at("b")) == bits_of(b_t));  // the transposed view was written row-major
  CHECK(loaded.at("f").dtype() == kFloat32);
}
