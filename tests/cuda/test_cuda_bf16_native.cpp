// test_cuda_bf16_native.cpp — the GPU's own bf16 matmul (CudaBackend::matmul_bf16_native: cuBLAS's bf16
// GEMM on tensor cores, float32 accumulation) against the CPU's bf16 matmul, which is the float32 sgemm of
// the same bf16 values rounded once (kernels/bf16_bridge.h). cuBLAS sums K in its own order, so the two
// agree to bf16's rounding of the output (relative 1e-2), not bit for bit. On the emulated device (and under
// TAPEGRAD_CUDA_MATMUL=simt) the native path declines and the bridge runs the float32 SIMT kernel.
#include "cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;
namespace cu = tapegrad::kernels::cuda;

namespace {

// a @ b in bf16 on both backends (out of shape `out_shape` in bf16 or float32 — a gradient gathered in float32
// —, optionally accumulating onto `init`).
void check_bf16_matmul(const char* what, const Tensor& a32, const Tensor& b32, const Shape& out_shape,
                       bool accumulate, bool transpose_b, DType out_dtype = kBFloat16) {
  const Tensor a = a32.to(kBFloat16), b = b32.to(kBFloat16);
  const Tensor init = randn(out_shape, kFloat32).to(out_dtype);
  Tensor want = init.clone();
  const Tensor bv = transpose_b ? b.transpose(-1, -2) : b;
  cpu_be().matmul(view(want), view(a), view(bv), accumulate);

  Tensor got = on_cuda(init);
  const Tensor ga = on_cuda(a), gb = transpose_b ? on_cuda(b).transpose(-1, -2) : on_cuda(b);
  const bool native = cu::cuda_backend(0).matmul_bf16_native(view(got), view(ga), view(gb), accumulate);
  if (cu::is_emulated() || cu::matmul_impl() == cu::MatmulImpl::Simt) {
    CHECK_FALSE(native);  // the bridge's float32 path is the one that runs there
    gpu_be().matmul(view(got), view(ga), view(gb), accumulate);
  } else {
    CHECK(native);
  }
  // A float32 output is not rounded to bf16: only the order of the float32 sums differs.
  const double tol = out_dtype == kFloat32 ? 1e-4 : 1e-2;
  expect_close(want, got, tol, tol, what);
}

}  // namespace

TEST_CASE("bf16 matmul on the GPU's own path against the CPU's bf16 matmul", "[cuda][matmul][bf16]") {
  check_bf16_matmul("2-D odd sizes", randn({67, 129}), randn({129, 33}), {67, 33}, false, false);
  check_bf16_matmul("accumulate", randn({64, 96}), randn({96, 48}), {64, 48}, true, false);
  check_bf16_matmul("transposed b (a Linear's weight)", randn({2, 17, 64}), randn({2, 40, 64}), {2, 17, 40}, false,
                    true);
  check_bf16_matmul("batched 4-D", randn({2, 3, 31, 16}), randn({2, 3, 16, 31}), {2, 3, 31, 31}, false, false);
  check_bf16_matmul("into float32", randn({67, 129}), randn({129, 33}), {67, 33}, false, false, kFloat32);
  check_bf16_matmul("added into float32 (dA gathered: the GEMM's beta = 1)", randn({2, 17, 64}), randn({2, 40, 64}),
                    {2, 17, 40}, true, true, kFloat32);
}

TEST_CASE("bf16 matmul through the autograd op: forward and backward on cuda against the cpu", "[cuda][matmul][bf16]") {
  const Tensor a32 = randn({2, 48, 64}), w32 = randn({80, 64});
  auto run = [&](Device d) {
    Tensor a = a32.to(kBFloat16).to(d).requires_grad_(true), w = w32.to(kBFloat16).to(d).requires_grad_(true);
    Tensor y = matmul(a, w.t());
    (y.to(kFloat32) * y.to(kFloat32)).sum().backward();
    return std::vector<Tensor>{y, a.grad(), w.grad()};
  };
  const std::vector<Tensor> c = run(Device::cpu()), g = run(gpu());
  expect_close(c[0], g[0], 1e-2, 1e-2, "y");
  // The gradients sum products of y, where an element of y may differ by one bf16 step between the two GEMMs:
  // compared norm-wise, ‖cuda − cpu‖ / ‖cpu‖ ≤ 1e-2.
  for (int i : {1, 2}) {
    const std::vector<double> want = values(c[i]), got = values(g[i]);
    double num = 0, den = 0;
    for (size_t j = 0; j < want.size(); ++j) num += (got[j] - want[j]) * (got[j] - want[j]), den += want[j] * want[j];
    INFO((i == 1 ? "dA" : "dW") << ": relative error " << std::sqrt(num / den));
    CHECK(std::sqrt(num / den) <= 1e-2);
  }
}
