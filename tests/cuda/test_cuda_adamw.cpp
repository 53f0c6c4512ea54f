// test_cuda_adamw.cpp — CudaBackend::adamw_update and adamw_update_many (all parameters in one
// launch) against the CPU backend over several steps, float32 and float64, with and without weight
// decay, contiguous and strided tensors.
//
// Both kernels round every operation on its own in the same order (no FMA contraction: see
// kernels/CMakeLists.txt) and √ and ÷ are correctly rounded on both, so the results must be
// bit-identical, not merely close: the comparisons are exact.
#include <cmath>
#include <vector>

#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

namespace {

kernels::AdamWStep step_at(int t, double lr, double weight_decay) {
  const double beta1 = 0.9, beta2 = 0.999;
  return {lr, beta1, beta2, 1e-8, weight_decay, 1.0 - std::pow(beta1, t), 1.0 - std::pow(beta2, t)};
}

// The parameter and its two moments on one device.
struct State {
  Tensor param, exp_avg, exp_avg_sq;
};

// Runs `steps` AdamW steps on both backends from the same start and the same gradients, and
// requires identical parameters and moments. `transposed`: every tensor is a transposed view
// (strided: the kernel's Indexer path); otherwise contiguous.
void check_adamw(DType dt, const Shape& shape, double weight_decay, bool transposed, int steps = 4) {
  INFO(fmt::format("{} {} weight_decay {}{}", dt, shape, weight_decay, transposed ? " transposed" : ""));
  auto as_view = [&](const Tensor& base) { return transposed ? base.transpose(0, 1) : base; };
  const Tensor p0 = randn(shape, Options(dt));
  // moments from a previous step (v ≥ 0), so the first step is not a special case
  const Tensor m0 = randn(shape, Options(dt)) * 0.1, v0 = rand(shape, Options(dt)) * 0.01;
  State cpu{p0.clone(), m0.clone(), v0.clone()};
  State gpu{on_cuda(p0), on_cuda(m0), on_cuda(v0)};
  for (int t = 1; t <= steps; ++t) {
    const Tensor grad = randn(shape, Options(dt)) * (t % 2 == 0 ? 1e-3 : 1.0);
    const kernels::AdamWStep s = step_at(t, 1e-2, weight_decay);
    cpu_be().adamw_update(view(as_view(cpu.param)), view(as_view(grad)), view(as_view(cpu.exp_avg)),
                          view(as_view(cpu.exp_avg_sq)), s);
    gpu_be().adamw_update(view(as_view(gpu.param)), view(as_view(on_cuda(grad))), view(as_view(gpu.exp_avg)),
                          view(as_view(gpu.exp_avg_sq)), s);
  }
  expect_close(cpu.param, gpu.param, 0.0, 0.0, "param");
  expect_close(cpu.exp_avg, gpu.exp_avg, 0.0, 0.0, "exp_avg");
  expect_close(cpu.exp_avg_sq, gpu.exp_avg_sq, 0.0, 0.0, "exp_avg_sq");
  // and the update did something
  CHECK(values(gpu.param) != values(p0));
}

}  // namespace

TEST_CASE("adamw: several steps match the CPU bit for bit, float32 and float64", "[cuda][adamw]") {
  for (DType dt : {kFloat32, kFloat64})
    for (double wd : {0.1, 0.0}) {
      check_adamw(dt, {1000}, wd, false);
      check_adamw(dt, {37, 53}, wd, false);
      check_adamw(dt, {1, 1}, wd, false);
    }
}

TEST_CASE("adamw: strided (transposed) tensors", "[cuda][adamw]") {
  for (DType dt : {kFloat32, kFloat64}) check_adamw(dt, {17, 30}, 0.01, true);
}

TEST_CASE("adamw: an empty parameter, bad dtypes and shapes", "[cuda][adamw]") {
  const kernels::AdamWStep s = step_at(1, 1e-3, 0.0);
  const Tensor e = on_cuda(zeros({0, 4}));
  CHECK_NOTHROW(gpu_be().adamw_update(view(e), view(e), view(e), view(e), s));
  const Tensor i = on_cuda(zeros({4}, Options(kInt32)));
  CHECK_THROWS_WITH(gpu_be().adamw_update(view(i), view(i), view(i), view(i), s), Catch::Contains("adamw_update"));
  const Tensor a = on_cuda(zeros({4})), b = on_cuda(zeros({5}));
  CHECK_THROWS_WITH(gpu_be().adamw_update(view(a), view(b), view(a), view(a), s), Catch::Contains("adamw_update"));
  const Tensor d = on_cuda(zeros({4}, Options(kFloat64)));
  CHECK_THROWS_WITH(gpu_be().adamw_update(view(a), view(a), view(d), view(a), s), Catch::Contains("adamw_update"));
}

TEST_CASE("adamw: many parameters in one launch match the CPU bit for bit", "[cuda][adamw]") {
  // Sizes around the kernel's 16384-element chunks, an empty one among them; every tensor contiguous
  // (one launch), then the same with one transposed parameter (one launch each, the fallback).
  manual_seed(77);
  const std::vector<Shape> shapes = {{1000}, {0, 3}, {16384}, {16385}, {3, 40000}, {1}, {128, 128}};
  for (DType dt : {kFloat32, kFloat64})
    for (bool one_strided : {false, true}) {
      INFO(fmt::format("{}{}", dt, one_strided ? " with a transposed parameter" : ""));
      std::vector<State> cpu, gpu;
      for (const Shape& s : shapes) {
        const Tensor p0 = randn(s, Options(dt)), m0 = randn(s, Options(dt)) * 0.1, v0 = rand(s, Options(dt)) * 0.01;
        cpu.push_back({p0.clone(), m0.clone(), v0.clone()});
        gpu.push_back({on_cuda(p0), on_cuda(m0), on_cuda(v0)});
      }
      for (int t = 1; t <= 3; ++t) {
        std::vector<kernels::AdamWTensors> on_cpu, on_gpu;
        std::vector<Tensor> grads;  // alive until the updates ran (views do not own their data)
        for (size_t i = 0; i < shapes.size(); ++i) {
          const bool transpose = one_strided && i == 4;
          auto as_view = [&](const Tensor& x) { return transpose ? x.transpose(0, 1) : x; };
          const Tensor g = randn(shapes[i], Options(dt)), g_gpu = on_cuda(g);
          grads.push_back(g);
          grads.push_back(g_gpu);
          on_cpu.push_back({view(as_view(cpu[i].param)), view(as_view(g)), view(as_view(cpu[i].exp_avg)),
                            view(as_view(cpu[i].exp_avg_sq))});
          on_gpu.push_back({view(as_view(gpu[i].param)), view(as_view(g_gpu)), view(as_view(gpu[i].exp_avg)),
                            view(as_view(gpu[i].exp_avg_sq))});
        }
        const kernels::AdamWStep s = step_at(t, 1e-2, 0.1);
        cpu_be().adamw_update_many(on_cpu, s);
        gpu_be().adamw_update_many(on_gpu, s);
      }
      for (size_t i = 0; i < shapes.size(); ++i) {
        INFO(fmt::format("parameter {} {}", i, shapes[i]));
        expect_close(cpu[i].param, gpu[i].param, 0.0, 0.0, "param");
        expect_close(cpu[i].exp_avg, gpu[i].exp_avg, 0.0, 0.0, "exp_avg");
        expect_close(cpu[i].exp_avg_sq, gpu[i].exp_avg_sq, 0.0, 0.0, "exp_avg_sq");
      }
    }
}
