// decode_threads.cpp — the default thread count of batch-1 decoding (see decode_threads.h).
#include "lm/decode_threads.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"

namespace tapegrad::lm {

int decode_threads(double parameters, int cores, double load) {
  cores = std::max(cores, 1);
  const double wanted = std::floor(std::max(parameters, 0.0) / kParametersPerThread);
  const double idle = std::round(double(cores) - std::max(load, 0.0));
  return int(std::clamp(std::min(wanted, idle), 1.0, double(cores)));
}

std::optional<double> load_average() {
  std::ifstream in("/proc/loadavg");
  double load = 0;
  if (!(in >> load)) return std::nullopt;
  return load;
}

int decode_threads_here(double parameters) {
  const int cores = num_threads();  // omp_get_max_threads: OMP_NUM_THREADS, else every core it may use
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return cores;
  return decode_threads(parameters, cores, load_average().value_or(0.0));
}

}  // namespace tapegrad::lm
