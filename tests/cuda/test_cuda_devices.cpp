// test_cuda_devices.cpp — tensors on two devices: every op refuses operands on different devices naming
// both, set_grad refuses a gradient on another device, and an optimizer refuses a parameter whose
// gradient lives elsewhere. (The CPU-only suite cannot make a second device.)
#include "nn/linear.h"
#include "optim/adamw.h"
#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

TEST_CASE("devices: ops with operands on cpu and cuda:0 are refused naming both devices", "[cuda][devices]") {
  const Tensor a = randn({3, 4}), b = on_cuda(randn({3, 4})), m = on_cuda(randn({4, 2}));
  const auto both = Catch::Contains("tensors are on different devices (cpu and cuda:0)");
  CHECK_THROWS_WITH(add(a, b), Catch::Contains("add") && both);
  CHECK_THROWS_WITH(mul(a, b), both);
  CHECK_THROWS_WITH(where(gt(a, 0.0), a, b), both);
  CHECK_THROWS_WITH(matmul(a, m), both);
  CHECK_THROWS_WITH(cat({a, b}, 0), Catch::Contains("different devices"));
  CHECK_THROWS_WITH(index_select(b, 0, arange(2.0)), Catch::Contains("different devices"));
  CHECK_THROWS_WITH(cross_entropy(b, arange(3.0)), Catch::Contains("different devices"));
  CHECK_THROWS_WITH(rms_norm(b, ones({4}), 1e-5), Catch::Contains("different devices"));
  // the same ops on one device run
  CHECK(add(b, b).device() == gpu());
  CHECK(matmul(b, m).shape() == Shape{3, 2});
}

TEST_CASE("devices: set_grad and the optimizers refuse a gradient on another device", "[cuda][devices]") {
  Tensor p = on_cuda(randn({2, 3})).requires_grad_();
  CHECK_THROWS_WITH(p.set_grad(randn({2, 3})),
                    Catch::Contains("set_grad: gradient [2, 3] float32 on cpu does not match tensor [2, 3] float32 on "
                                    "cuda:0"));
  CHECK_FALSE(p.grad().defined());
  p.set_grad(on_cuda(ones({2, 3})));
  CHECK(p.grad().device() == gpu());

  // A module moved to the GPU takes its gradients along, so its optimizer steps there.
  nn::Linear lin(3, 2);
  optim::AdamW opt(lin.parameters());
  sum(lin.forward(randn({4, 3}))).backward();
  lin.to(gpu());
  for (const Tensor& q : lin.parameters()) CHECK(q.grad().device() == gpu());
  opt.step();
  for (const Tensor& q : lin.parameters()) CHECK(q.device() == gpu());
}
