// test_cuda_matmul_gathered.cpp — on cuda:0, bf16 matmuls reading one input (attention's q, k, v) hand their dA
// to one float32 buffer: the first GEMM writes it in float32, the others add into it (beta = 1;
// autograd/ops/matmul.cpp). Checked by the allocator's peak during backward — one float32 [N, C] buffer, where
// a bf16 dA per reader widened and summed by the engine held four times that — and by the gradient against the
// CPU's (the same float32 sums in another order).
#include "kernels/cuda/memory_info.h"
#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;
namespace cu = tapegrad::kernels::cuda;

TEST_CASE("bf16 matmuls reading one input gather dA in one float32 buffer on the device", "[cuda][matmul_gathered]") {
  const int64_t N = 256, C = 512;  // dA [N, C] dominates: each weight is [1, C], each output [N, 1]
  Generator gen(4);
  const Tensor x0 = randn({N, C}, kFloat32, &gen);
  std::vector<Tensor> w;
  for (int i = 0; i < 3; ++i) w.push_back(randn({1, C}, kFloat32, &gen).to(kBFloat16));
  const auto run = [&](Device d, size_t* peak) {
    Tensor x = x0.to(d).requires_grad_(true);
    const Tensor h = x.to(kBFloat16);  // the cast sums its gradients in float32
    Tensor loss = zeros({}, Options(kFloat32).device(d));
    for (const Tensor& wi : w) loss = loss + matmul(h, wi.to(d).t()).to(kFloat32).sum();
    const size_t before = d.type == DeviceType::CUDA ? cu::memory_stats().allocated_bytes : 0;
    if (d.type == DeviceType::CUDA) cu::reset_peak_memory_stats();
    loss.backward();
    if (peak != nullptr) *peak = cu::memory_stats().peak_allocated_bytes - before;
    return x.grad();
  };
  size_t peak = 0;
  const Tensor on_gpu = run(gpu(), &peak), on_cpu = run(Device::cpu(), nullptr);
  const size_t one = static_cast<size_t>(N * C) * sizeof(float);
  INFO("peak during backward " << peak << " bytes; one float32 [N, C] buffer is " << one);
  CHECK(peak >= one);             // dA itself, in float32
  CHECK(peak <= one + one / 4);   // and nothing of its size beside it
  CHECK(on_gpu.dtype() == kFloat32);
  expect_close(on_cpu, on_gpu, 1e-5, 1e-5, "x.grad");
}

TEST_CASE("a float32 weight's gradient through its transpose is taken over, not copied", "[cuda][matmul_gathered]") {
  // y = x Wᵀ: dW comes out of the GEMM as (Gᵀ X)ᵀ, passes the transpose entry, and becomes W.grad — the engine
  // drops the gradient an entry received before passing its inputs' on, so that buffer is W.grad itself.
  const int64_t N = 4, C = 256, O = 512;
  Generator gen(6);
  Tensor w = randn({O, C}, kFloat32, &gen).to(gpu()).requires_grad_(true);
  const Tensor x = randn({N, C}, kFloat32, &gen).to(gpu());
  const Tensor loss = matmul(x, w.t()).sum();
  const size_t before = cu::memory_stats().allocated_bytes;
  cu::reset_peak_memory_stats();
  loss.backward();
  const size_t peak = cu::memory_stats().peak_allocated_bytes - before;
  const size_t one = static_cast<size_t>(O * C) * sizeof(float);
  INFO("peak during backward " << peak << " bytes; dW is " << one);
  CHECK(peak >= one);
  CHECK(peak <= one + one / 4);
  expect_close(matmul(ones({O, N}), x.to(Device::cpu())), w.grad(), 1e-5, 1e-5, "dW = Gᵀ X");
}
