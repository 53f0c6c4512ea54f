// test_cuda_clip_grad.cpp — gradient clipping on the GPU in three launches for all gradients
// (kernels/cuda/clip_grad_norm.cu, reached through optim::clip_grad_norm_tensor) against the CPU's
// composition (optim/clip_grad.cpp), float32 and float64, gradients of many sizes (empty, one element,
// several chunks of 16384), with and without clipping, and non-finite norms.
//
// Tolerances: the GPU sums g² in float64 for every dtype, the CPU rounds each gradient's Σ g² to the
// gradient's dtype first, so the float32 norms agree to ~1e-7 relative (checked at 1e-6) and the
// float64 ones to ~1e-15 (checked at 1e-13). Unclipped gradients must come back bit for bit; clipped
// ones within the scale's difference (the same relative bounds).
#include <cmath>
#include <limits>
#include <vector>

#include "optim/clip_grad.h"
#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

namespace {

// Parameters on `device` with the given gradients (copies of `grads`, which live on the CPU).
std::vector<Tensor> params_with_grads(const std::vector<Tensor>& grads, Device device) {
  std::vector<Tensor> params;
  for (const Tensor& g : grads) {
    Tensor p = zeros(g.shape(), Options(g.dtype()).device(device).requires_grad());
    p.set_grad(g.to(device));
    params.push_back(p);
  }
  return params;
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = values(a), y = values(b);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(std::abs(y[i]), 1e-30));
  return worst;
}

void check_clip(DType dt, double max_norm, const std::vector<Shape>& shapes) {
  INFO(fmt::format("{} max_norm {}", dt, max_norm));
  std::vector<Tensor> grads;
  for (const Shape& s : shapes) grads.push_back(randn(s, Options(dt)));
  std::vector<Tensor> cpu = params_with_grads(grads, Device::cpu()), gpu_params = params_with_grads(grads, gpu());
  const Tensor n_cpu = optim::clip_grad_norm_tensor(cpu, max_norm);
  const Tensor n_gpu = optim::clip_grad_norm_tensor(gpu_params, max_norm);
  REQUIRE(n_gpu.defined());
  CHECK(n_gpu.dtype() == kFloat64);
  CHECK(n_gpu.device() == gpu());
  const double tol = dt == kFloat32 ? 1e-6 : 1e-13;
  const double a = n_gpu.item<double>(), b = n_cpu.item<double>();
  CHECK(std::abs(a - b) <= tol * b);
  const bool clipped = b > max_norm;
  for (size_t i = 0; i < grads.size(); ++i) {
    INFO(fmt::format("gradient {} of shape {}", i, grads[i].shape()));
    const Tensor g_gpu = gpu_params[i].grad().to(Device::cpu()), g_cpu = cpu[i].grad();
    if (clipped)
      CHECK(max_rel_diff(g_gpu, g_cpu) <= tol);
    else
      CHECK(values(g_gpu) == values(grads[i]));  // untouched, bit for bit
  }
}

}  // namespace

TEST_CASE("clip_grad_norm on the GPU: all gradients at once, against the CPU", "[cuda][clip]") {
  const std::vector<Shape> shapes = {{3, 5}, {1}, {0, 4}, {16384}, {16385}, {7, 5000}, {2, 3, 4}};
  for (DType dt : {kFloat32, kFloat64}) {
    check_clip(dt, 1.0, shapes);    // norm ≈ 270: clipped
    check_clip(dt, 1e6, shapes);    // not clipped: nothing changes
  }
  check_clip(kFloat32, 1.0, {{5}});  // a single small gradient
}

TEST_CASE("clip_grad_norm on the GPU goes through the one-pass kernels", "[cuda][clip]") {
  std::vector<Tensor> grads = {randn({4, 4}).to(gpu()), randn({10}).to(gpu())};
  const Tensor n = clip_grad_norm_many_(grads, 1.0);
  REQUIRE(n.defined());  // the CUDA backend took it (the CPU has no such kernel: undefined there)
  CHECK_FALSE(clip_grad_norm_many_({randn({3})}, 1.0).defined());
  // mixed dtypes or a strided gradient: declined, the composition runs instead
  CHECK_FALSE(clip_grad_norm_many_({randn({3}).to(gpu()), randn({3}, Options(kFloat64)).to(gpu())}, 1.0).defined());
  CHECK_FALSE(clip_grad_norm_many_({randn({3, 4}).to(gpu()).transpose(0, 1)}, 1.0).defined());
}

TEST_CASE("clip_grad_norm on the GPU: a NaN or infinite norm scales nothing", "[cuda][clip]") {
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    INFO("bad value " << bad);
    const Tensor g0 = from_vector<float>({1.f, 2.f, float(bad), 4.f}, {4});
    const Tensor g1 = from_vector<float>({3.f, -4.f}, {2});
    std::vector<Tensor> params = params_with_grads({g0, g1}, gpu());
    const double n = optim::clip_grad_norm_tensor(params, 1.0).item<double>();
    CHECK_FALSE(std::isfinite(n));
    CHECK(values(params[1].grad()) == values(g1));  // the finite gradient is left alone
    // the CPU agrees: nothing scaled there either
    std::vector<Tensor> cpu = params_with_grads({g0, g1}, Device::cpu());
    CHECK_FALSE(std::isfinite(optim::clip_grad_norm(cpu, 1.0)));
    CHECK(values(cpu[1].grad()) == values(g1));
  }
}
