// bench_stats.h — the statistics every benchmark of bench/ reports: the median of repeated timings (the
// middle value; the mean of the two middle ones for an even count), robust to the bimodal timings of a
// shared two-vCPU machine (../shared/bench/README.md).
#pragma once
#include <algorithm>
#include <vector>

namespace tapegrad::bench {

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace tapegrad::bench
