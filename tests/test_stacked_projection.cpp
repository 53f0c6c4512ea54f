// test_stacked_projection.cpp — generation under bf16 precision runs attention's q, k, v and SwiGLU's w1, w3 as one
// matmul each over a stacked bf16 weight (nn::StackedWeightCast, nn::stacked_linear_forward):
//  * the stacked copy exists only where each weight's bf16 copy would be kept (a CastCacheGuard, bf16 precision,
//    no weight requiring grad under grad mode), is kept across calls and renewed when a weight changes;
//  * its matmul gives each layer's output bit for bit, side by side (layers with a bias or int8 weights: not
//    stacked);
//  * a TransformerLM's cached forward and decode steps give the same logits and KV cache with the stacked
//    projections (under the guard) as without them, with and without QK-norm.
#include <catch2/catch.hpp>
#include <optional>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/bf16_bridge.h"
#include "kernels/error.h"
#include "nn/kv_cache.h"
#include "nn/linear.h"
#include "nn/precision.h"
#include "nn/transformer_lm.h"
#include "tests/same_bits.h"
#include "tiny_lm_config.h"

using namespace tapegrad;
using testing::same_bits;

TEST_CASE("StackedWeightCast stacks bf16 copies only where each would be kept, and renews them", "[stacked]") {
  nn::PrecisionGuard bf16(nn::Precision::BF16);
  Tensor a = randn({6, 4}, Options().requires_grad()), b = randn({3, 4}, Options().requires_grad());
  nn::StackedWeightCast cast;
  SECTION("inference under the guard: one stacked copy, renewed after an in-place write") {
    NoGradGuard no_grad;
    nn::CastCacheGuard cache;
    const Tensor s1 = cast({a, b}, nn::Stage::Matmul), s2 = cast({a, b}, nn::Stage::Matmul);
    REQUIRE(s1.defined());
    CHECK(s1.dtype() == kBFloat16);
    CHECK(s1.shape() == Shape{9, 4});
    CHECK(s1.storage() == s2.storage());
    CHECK(same_bits(s1, cat({a.to(kBFloat16), b.to(kBFloat16)}, 0)));
    b.mul_(3.0);
    const Tensor s3 = cast({a, b}, nn::Stage::Matmul);
    CHECK(s3.storage() != s1.storage());
    CHECK(same_bits(s3, cat({a.to(kBFloat16), b.to(kBFloat16)}, 0)));
    CHECK(cast({b, a}, nn::Stage::Matmul).storage() != s3.storage());  // other weights: stacked anew
    CHECK_FALSE(cast({a, b}, nn::Stage::Norm).defined());              // a float32 stage converts nothing
    CHECK_FALSE(cast({a, randn({2, 5})}, nn::Stage::Matmul).defined());  // different input sizes
  }
  SECTION("training, no guard, fp32: nothing stacked") {
    nn::CastCacheGuard cache;
    CHECK_FALSE(cast({a, b}, nn::Stage::Matmul).defined());  // grad mode, weights that require grad
    NoGradGuard no_grad;
    {
      nn::PrecisionGuard fp32(nn::Precision::FP32);
      CHECK_FALSE(cast({a, b}, nn::Stage::Matmul).defined());
    }
  }
  SECTION("without the guard") {
    NoGradGuard no_grad;
    CHECK_FALSE(cast({a, b}, nn::Stage::Matmul).defined());
  }
}

TEST_CASE("stacked_linear_forward gives each layer's output side by side, bit for bit", "[stacked]") {
  Generator gen(3);
  nn::Linear q(16, 24, false, kFloat32, &gen), k(16, 8, false, kFloat32, &gen), v(16, 8, false, kFloat32, &gen);
  const Tensor x = randn({2, 5, 16}, Options(), &gen);
  nn::PrecisionGuard bf16(nn::Precision::BF16);
  NoGradGuard no_grad;
  nn::CastCacheGuard cache;
  nn::StackedWeightCast cast;
  const Tensor y = nn::stacked_linear_forward(x, {&q, &k, &v}, cast);
  REQUIRE(y.defined());
  CHECK(y.shape() == Shape{2, 5, 40});
  CHECK(same_bits(y.narrow(2, 0, 24).contiguous(), q.forward(x)));
  CHECK(same_bits(y.narrow(2, 24, 8).contiguous(), k.forward(x)));
  CHECK(same_bits(y.narrow(2, 32, 8).contiguous(), v.forward(x)));
  nn::Linear with_bias(16, 8, true, kFloat32, &gen);
  CHECK_FALSE(nn::stacked_linear_forward(x, {&q, &with_bias}, cast).defined());
  nn::Linear quantized(16, 8, false, kFloat32, &gen);
  quantized.quantize_int8(16);
  CHECK_FALSE(nn::stacked_linear_forward(x, {&q, &quantized}, cast).defined());
}

TEST_CASE("bf16 generation with stacked projections gives the logits and cache of the projections one by one",
          "[stacked]") {
  // With QK-norm too: q and k are then normalized from their narrowed parts of the stacked output.
  const bool qk_norm = GENERATE(false, true);
  INFO("qk_norm " << qk_norm);
  Generator gen(8);
  nn::TransformerLMConfig config = tapegrad::testing::tiny_gqa_lm();
  config.qk_norm = qk_norm;
  nn::TransformerLM model(config, &gen);
  const Tensor ids = randint(0, 64, {1, 9}, kInt64, &gen);
  nn::PrecisionGuard bf16(nn::Precision::BF16);
  NoGradGuard no_grad;
  struct Run {
    Tensor prefill, step, key_cache;
    uint64_t matmuls = 0;  // bf16 matmul calls (the CPU widens each through the bf16 bridge)
  };
  const auto run = [&](bool stacked) {
    std::optional<nn::CastCacheGuard> guard;
    if (stacked) guard.emplace();
    nn::KVCache cache(model.config, 1);
    const kernels::Bf16BridgeStats before = kernels::bf16_bridge_stats(Device::cpu());
    Run r;
    r.prefill = model.forward(ids.narrow(1, 0, 6), cache, /*last_only=*/false);
    for (int64_t t = 6; t < 9; ++t) r.step = model.forward(ids.narrow(1, t, 1), cache);
    const Tensor position = full({1}, 9.0, Options(kInt64));
    r.step = cat({r.step, model.forward_decode(ids.narrow(1, 8, 1), cache, position)}, 1);
    r.key_cache = cache.layer(1).k.clone();
    r.matmuls = kernels::bf16_bridge_stats(Device::cpu()).since(before)[kernels::BackendFunction::Matmul].widened_calls;
    return r;
  };
  const Run one_by_one = run(false), stacked = run(true);
  CHECK(same_bits(stacked.prefill, one_by_one.prefill));
  CHECK(same_bits(stacked.step, one_by_one.step));
  CHECK(same_bits(stacked.key_cache, one_by_one.key_cache));
  // 5 forwards, each with 3 matmuls fewer per layer (q, k, v → 1; w1, w3 → 1)
  CHECK(one_by_one.matmuls - stacked.matmuls == 5 * 3 * uint64_t(model.config.n_layers));
}
