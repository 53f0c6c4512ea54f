// throughput.cpp — the matmul ceiling (see throughput.h).
#include "lm/throughput.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"

namespace tapegrad::lm {

double measure_matmul_gflops(int n, int reps, Device device, DType dtype) {
  NoGradGuard no_grad;
  const bool on_cpu = device.type == DeviceType::CPU;
  if (n <= 0) n = on_cpu ? 512 : 4096;
  Generator gen(0);  // random operands: a GPU's matrix units can run faster on constant or zero data
  const Tensor a = randn({n, n}, Options(kFloat32), &gen).to(dtype).to(device);
  const Tensor b = randn({n, n}, Options(kFloat32), &gen).to(dtype).to(device);
  std::vector<double> t;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const Tensor c = matmul(a, b);
    if (!on_cpu) (void)c.narrow(0, 0, 1).narrow(1, 0, 1).item<double>();  // waits for the GPU
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) t.push_back(s);
  }
  std::sort(t.begin(), t.end());
  return 2.0 * double(n) * n * n / t[t.size() / 2] / 1e9;
}

}  // namespace tapegrad::lm
