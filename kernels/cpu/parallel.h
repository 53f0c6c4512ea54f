// parallel.h — parallel_for over [0, n) on the OpenMP pool that OpenBLAS shares with us.
// Work below `grain` items runs inline on the calling thread: tiny tensors (the per-op overhead
// case) never pay for waking threads. Chunks are static, so results are deterministic for a
// given thread count.
#pragma once
#include <algorithm>
#include <cstdint>

#include <omp.h>

namespace tapegrad::kernels::cpu {

inline constexpr int64_t kElementwiseGrain = 32768;

template <class F>
void parallel_for(int64_t n, int64_t grain, F&& body) {
  if (n <= 0) return;
  if (n <= grain) {
    body(int64_t{0}, n);
    return;
  }
  const int max_threads = omp_get_max_threads();
  if (max_threads <= 1 || omp_in_parallel()) {
    body(int64_t{0}, n);
    return;
  }
  const int nt = static_cast<int>(std::min<int64_t>(max_threads, (n + grain - 1) / grain));
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num(), T = omp_get_num_threads();
    const int64_t chunk = (n + T - 1) / T;
    const int64_t b = std::min<int64_t>(n, t * chunk), e = std::min<int64_t>(n, b + chunk);
    if (b < e) body(b, e);
  }
}

}  // namespace tapegrad::kernels::cpu
