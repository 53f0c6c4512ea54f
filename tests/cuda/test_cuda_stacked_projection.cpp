// test_cuda_stacked_projection.cpp — bf16 generation on cuda:0 with q, k, v and w1, w3 each stacked into one matmul
// (nn::StackedWeightCast, under a CastCacheGuard) against the projections one by one on the same device: the
// same logits and KV cache — bit for bit on the emulated device (its SIMT matmul sums each column alone), within
// bf16 rounding on a GPU (cuBLAS may pick another kernel, with another order of sums, for the wider matmul).
#include <optional>

#include "kernels/bf16_bridge.h"
#include "nn/kv_cache.h"
#include "nn/precision.h"
#include "nn/transformer_lm.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/same_bits.h"
#include "tests/tiny_lm_config.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

TEST_CASE("bf16 generation on the device with stacked projections gives the projections' results one by one",
          "[cuda][stacked]") {
  Generator gen(8);
  nn::TransformerLM model(testing::tiny_gqa_lm(), &gen);
  model.to(gpu());
  const Tensor ids = randint(0, 64, {1, 9}, kInt64, &gen).to(gpu());
  nn::PrecisionGuard bf16(nn::Precision::BF16);
  NoGradGuard no_grad;
  const auto run = [&](bool stacked) {
    std::optional<nn::CastCacheGuard> guard;
    if (stacked) guard.emplace();
    nn::KVCache cache(model.config, 1, 0, gpu());
    std::vector<Tensor> out{model.forward(ids.narrow(1, 0, 6), cache, /*last_only=*/false)};
    for (int64_t t = 6; t < 9; ++t) out.push_back(model.forward(ids.narrow(1, t, 1), cache));
    const Tensor position = full({1}, 9.0, Options(kInt64).device(gpu()));
    out.push_back(model.forward_decode(ids.narrow(1, 8, 1), cache, position));
    out.push_back(cache.layer(1).k.narrow(2, 0, 10));
    for (Tensor& t : out) t = t.to(kFloat32).reshape({-1});  // bf16 values widen exactly
    return cat(out, 0).to(Device::cpu());
  };
  const Tensor one_by_one = run(false), stacked = run(true);
  if (kernels::cuda::is_emulated()) {
    CHECK(testing::same_bits(stacked, one_by_one));
  } else {
    expect_close(one_by_one.to(kFloat64), stacked.to(kFloat64), 1e-2, 1e-2, "stacked vs one by one (bf16)");
  }
}
