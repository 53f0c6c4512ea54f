// throughput.cpp — the matmul ceiling (see throughput.h).
#include "lm/throughput.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "autograd/tapegrad.h"

namespace tapegrad::lm {

double measure_matmul_gflops(int n, int reps) {
  NoGradGuard no_grad;
  const Tensor a = full({n, n}, 0.5), b = full({n, n}, 0.25);
  std::vector<double> t;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const Tensor c = matmul(a, b);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) t.push_back(s);
  }
  std::sort(t.begin(), t.end());
  return 2.0 * double(n) * n * n / t[t.size() / 2] / 1e9;
}

}  // namespace tapegrad::lm
