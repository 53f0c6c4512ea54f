// test_cuda_mma.cpp — kernels/cuda/mma.h's tensor-core primitives (mma.sync m16n8k16 bf16 → f32, ldmatrix
// m8n8.x4 with and without .trans) against plain loops, through one warp on the device
// (kernels/cuda/flash_mma_probe.h). On the emulated device this checks the emulation's fragment layouts; on a
// real GPU (scripts/gpu_check.sh) the same expectations check the hardware, so the two agree.
#include <cstdint>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/bfloat16.h"
#include "kernels/cuda/flash_mma_probe.h"

using namespace tapegrad;
namespace cu = tapegrad::kernels::cuda;

namespace {

// n random bf16 values (bits), each a small integer times 1/8 so every product and sum is exact in float32.
std::vector<uint16_t> random_bf16(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-16, 16);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = bfloat16(float(dist(rng)) / 8.0f).bits;
  return v;
}
float f(uint16_t bits) { return bfloat16_bits_to_float(bits); }

void check_product(cu::MmaProbeLoad load) {
  const std::vector<uint16_t> a = random_bf16(256, 1), b = random_bf16(128, 2);
  std::vector<float> c(128), d(128, -1.0f);
  for (size_t i = 0; i < c.size(); ++i) c[i] = float(int(i) % 7) - 3.0f;
  cu::mma_probe_product(a.data(), b.data(), c.data(), d.data(), load);
  int bad = 0;
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      float want = c[size_t(m * 8 + n)];
      for (int k = 0; k < 16; ++k) want += f(a[size_t(m * 16 + k)]) * f(b[size_t(k * 8 + n)]);
      if (d[size_t(m * 8 + n)] != want && bad++ < 5) FAIL_CHECK("D[" << m << "][" << n << "] = " << d[size_t(m * 8 + n)] << ", want " << want);
    }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("mma m16n8k16 bf16: D = C + A·B, fragments per the PTX layouts", "[cuda][mma][flash]") {
  SECTION("fragments read directly") { check_product(cu::MmaProbeLoad::Direct); }
  SECTION("A and B (from Bᵀ) by ldmatrix.x4, as S = Q·Kᵀ") { check_product(cu::MmaProbeLoad::Ldmatrix); }
  SECTION("B by ldmatrix.x4.trans, as O += P·V") { check_product(cu::MmaProbeLoad::LdmatrixTrans); }
}

TEST_CASE("ldmatrix m8n8.x4 (.trans): each lane's words per the PTX layout", "[cuda][mma][flash]") {
  std::vector<uint16_t> m(256);
  for (size_t i = 0; i < m.size(); ++i) m[i] = uint16_t(i + 1);  // distinct bits: row r, column c → 8r + c + 1
  for (bool trans : {false, true}) {
    INFO((trans ? "trans" : "plain"));
    std::vector<uint32_t> words(128, 0);
    cu::mma_probe_ldmatrix(m.data(), trans, words.data());
    int bad = 0;
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i) {
        const int g = lane / 4, t = lane % 4;
        // matrix i = rows 8i .. 8i+7; element (r, c) of it = m[(8i + r)·8 + c]
        auto at = [&](int r, int c) { return uint32_t(m[size_t((8 * i + r) * 8 + c)]); };
        const uint32_t want = trans ? at(2 * t, g) | (at(2 * t + 1, g) << 16) : at(g, 2 * t) | (at(g, 2 * t + 1) << 16);
        if (words[size_t(lane * 4 + i)] != want && bad++ < 5)
          FAIL_CHECK("lane " << lane << " word " << i << ": " << words[size_t(lane * 4 + i)] << ", want " << want);
      }
    CHECK(bad == 0);
  }
}
