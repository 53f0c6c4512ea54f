// overhead.cpp — per-op framework overhead of tapegrad: the exact measurement of
// shared/bench/op_overhead.cpp (LibTorch C++) and torch_op_overhead.py, on our library.
//
// A chain of N tiny ops on E-element fp32 tensors, x = op(x, b), where x starts from a leaf
// `a` and both a and b require grad, so every op records a tape entry; then x.sum().backward()
// replays the N-entry tape. Then the same chain under NoGradGuard. 1 thread. Per op, median
// over R repetitions (plus one warm-up that is not counted):
//   fwd_grad    forward incl. recording (µs/op)      bwd        backward per entry (µs/op)
//   total       fwd_grad + bwd                        fwd_nograd forward, recording off
//   autograd    fwd_grad − fwd_nograd (the cost of recording alone)
//
// Usage: bench_overhead [N=10000] [numel=64] [reps=9]
// Ends with one line `RESULT {json}` (what bench/run.sh parses).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tapegrad.h"
#include "bench/bench_stats.h"
#include "kernels/backend.h"

using namespace tapegrad;
using Clock = std::chrono::steady_clock;

static double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}
using tapegrad::bench::median;

int main(int argc, char** argv) {
  const int N = argc > 1 ? std::atoi(argv[1]) : 10000;
  const int E = argc > 2 ? std::atoi(argv[2]) : 64;
  const int R = argc > 3 ? std::atoi(argv[3]) : 9;
  if (N < 1 || E < 1 || R < 1) {
    std::fprintf(stderr, "usage: bench_overhead [N>=1] [numel>=1] [reps>=1]\n");
    return 2;
  }
  kernels::set_num_threads(1);
  using Op = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"add", [](const Tensor& x, const Tensor& b) { return x + b; }},
      {"mul", [](const Tensor& x, const Tensor& b) { return x * b; }},
      {"tanh", [](const Tensor& x, const Tensor&) { return tanh(x); }},
      {"add_scalar", [](const Tensor& x, const Tensor&) { return x + 1.0; }},
  };
  std::printf("tapegrad (C++), threads %d, OpenBLAS core %s, chain of N=%d ops on %d-element fp32 tensors, "
              "median of %d reps\n",
              kernels::num_threads(), kernels::blas_core_name(), N, E, R);
  std::printf("%-12s%10s%10s%10s%12s%10s   us/op\n", "op", "fwd_grad", "bwd", "total", "fwd_nograd", "autograd");
  std::string json;
  for (const auto& [name, op] : ops) {
    std::vector<double> fg, bw, ng;
    float check = 0;
    for (int r = 0; r <= R; ++r) {  // r == 0 is warm-up
      Tensor a = full({E}, 0.5, Options().requires_grad());
      Tensor b = full({E}, 1.0, Options().requires_grad());
      const auto t0 = Clock::now();
      Tensor x = a;
      for (int i = 0; i < N; ++i) x = op(x, b);
      const auto t1 = Clock::now();
      x.sum().backward();
      const auto t2 = Clock::now();
      Tensor y = a;
      Clock::time_point t3, t4;
      {
        NoGradGuard g;
        t3 = Clock::now();
        for (int i = 0; i < N; ++i) y = op(y, b);
        t4 = Clock::now();
      }
      check += a.grad().data<float>()[0] + y.data<float>()[0];  // keeps the work observable
      if (r == 0) continue;
      fg.push_back(us(t0, t1) / N);
      bw.push_back(us(t1, t2) / N);
      ng.push_back(us(t3, t4) / N);
    }
    const double f = median(fg), b = median(bw), n = median(ng);
    std::printf("%-12s%10.3f%10.3f%10.3f%12.3f%10.3f\n", name.c_str(), f, b, f + b, n, f - n);
    if (check != check) std::printf("  (note: %s produced NaN)\n", name.c_str());
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s\"%s\":{\"fwd_grad_us\":%.4f,\"bwd_us\":%.4f,\"total_us\":%.4f,\"fwd_nograd_us\":%.4f,"
                  "\"autograd_us\":%.4f}",
                  json.empty() ? "" : ",", name.c_str(), f, b, f + b, n, f - n);
    json += buf;
  }
  std::printf("RESULT {\"lib\":\"tapegrad\",\"n\":%d,\"numel\":%d,\"reps\":%d,\"threads\":%d,\"blas_core\":\"%s\","
              "\"ops\":{%s}}\n",
              N, E, R, kernels::num_threads(), kernels::blas_core_name(), json.c_str());
  return 0;
}
