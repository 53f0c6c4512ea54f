// test_cuda_ce_inplace.cpp — cross_entropy's backward on cuda:0 writes the logits' gradient over the saved logits
// when the caller dropped them (autograd/ops/fused.cpp; the CPU side: tests/test_cross_entropy_inplace.cpp): the
// CUDA kernel reads each x_ij just before it writes dx_ij (kernels/cuda/fused_cross_entropy.cu). In place, the
// gradient is bitwise the GPU's out-of-place one and matches the CPU's, in float32, float64 and bfloat16 (the
// native bf16 kernel), for short rows (a warp per row) and long ones (a block per row), with ignored rows.
#include <vector>

#include "autograd/node.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/grad_probe.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

namespace {

using testing::probe;

struct Outcome {
  Tensor dlogits;
  bool in_place = false;  // dlogits lives in the logits' buffer
};

// backward of cross_entropy(probe(x), t) on x's device; keep_logits: the caller holds the logits through it.
Outcome run_ce(const Tensor& x_value, const Tensor& t, bool keep_logits) {
  Tensor x = x_value.detach().clone().requires_grad_();
  Outcome o;
  Tensor kept, loss;
  const void* logits_data = nullptr;
  {
    Tensor logits = probe(x, &o.dlogits);
    logits_data = logits.data_ptr();
    loss = cross_entropy(logits, t);
    if (keep_logits) kept = logits;
  }
  loss.backward();
  o.in_place = o.dlogits.data_ptr() == logits_data;
  return o;
}

Tensor targets_for(int64_t N, int64_t V, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> t(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) t[i] = i % 3 == 1 ? -100 : static_cast<int64_t>(g.below(static_cast<uint64_t>(V)));
  return from_vector<int64_t>(t, {N});
}

}  // namespace

TEST_CASE("cross_entropy's gradient over the dropped logits on cuda: in place, as out of place, as the cpu",
          "[cuda][ce_inplace]") {
  struct Case {
    int64_t N, V;
  };
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    for (const Case& c : {Case{9, 37}, Case{5, 1030}}) {
      INFO(fmt::format("{} N {} V {}", dt, c.N, c.V));
      Generator g(uint64_t(c.N * c.V));
      const Tensor x = mul(randn({c.N, c.V}, Options(kFloat64), &g), 3.0).to(dt);
      const Tensor t = targets_for(c.N, c.V, 17);
      const Outcome cpu = run_ce(x, t, /*keep_logits=*/false);
      const Outcome gpu_in = run_ce(on_cuda(x), t.to(gpu()), /*keep_logits=*/false);
      const Outcome gpu_out = run_ce(on_cuda(x), t.to(gpu()), /*keep_logits=*/true);
      CHECK(cpu.in_place);
      CHECK(gpu_in.in_place);
      CHECK_FALSE(gpu_out.in_place);
      REQUIRE(gpu_in.dlogits.device() == gpu());
      CHECK(gpu_in.dlogits.dtype() == dt);
      CHECK((values(gpu_in.dlogits) == values(gpu_out.dlogits)));  // bitwise: doubles hold each value exactly
      const double tol = dt == kBFloat16 ? 1e-2 : rtol_for(dt);
      expect_close(cpu.dlogits, gpu_in.dlogits, tol, dt == kBFloat16 ? 1e-4 : atol_for(dt), "cuda vs cpu");
    }
  }
}
