// fused_ops.cpp — the fused Transformer ops against the compositions they replace, at the sizes of
// the tiny config (batch 8 × context 256 = 2048 rows; vocab 10000, d_model 512, d_ff 1344):
//   cross-entropy   logits [2048, 10000] float32: cross_entropy vs log_softmax + gather + masked mean
//   RMSNorm         x [2048, 512], weight [512]:  rms_norm vs x·rsqrt(mean(x²) + eps)·w
//   SwiGLU gate     a, b [2048, 1344]:            swiglu vs silu(a) * b
// For each: the forward alone (grad mode on, so what training pays) and forward + backward (from a
// fixed random cotangent for RMSNorm and SwiGLU), as the
// median of `reps` timed runs after one warm-up; fused and composition runs alternate, so load from
// elsewhere on a shared machine moves both alike. Wall and process CPU time are both reported (on a
// shared machine, the 1-thread CPU time is the steadier figure).
//
// Usage: bench_fused [--threads 1] [--reps 15]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tapegrad.h"
#include "bench/bench_stats.h"
#include "nn/loss.h"

using namespace tapegrad;
using Clock = std::chrono::steady_clock;

namespace {

using tapegrad::bench::median;

double cpu_ms() {  // CPU time of the whole process: with 1 thread, what the work costs whatever else runs
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return 1e3 * double(ts.tv_sec) + 1e-6 * double(ts.tv_nsec);
}
long minor_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

// Times y = f(): forward only, then forward + backward (y.backward(cot); cot undefined for a 0-d y),
// in wall time and process CPU time; prints one row of each.
void time_pair(const char* what, int reps, const std::function<Tensor()>& fused, const std::function<Tensor()>& comp,
               const std::vector<Tensor>& leaves, const Tensor& cot = Tensor()) {
  struct Series {
    std::vector<double> fwd, both, cfwd, cboth;
    long faults = 0;
  } fs, cs;
  auto once = [&](const std::function<Tensor()>& f, Series& out, bool keep) {
    for (Tensor l : leaves) l.zero_grad();
    const long f0 = minor_faults();
    const double c0 = cpu_ms();
    const auto t0 = Clock::now();
    Tensor y = f();
    const auto t1 = Clock::now();
    const double c1 = cpu_ms();
    y.backward(cot);
    const auto t2 = Clock::now();
    const double c2 = cpu_ms();
    if (keep) {
      out.fwd.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      out.both.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
      out.cfwd.push_back(c1 - c0);
      out.cboth.push_back(c2 - c0);
      out.faults += minor_faults() - f0;
    }
  };
  once(fused, fs, false);
  once(comp, cs, false);
  for (int r = 0; r < reps; ++r) {
    once(fused, fs, true);
    once(comp, cs, true);
  }
  auto row = [&](const char* clock, const std::vector<double>& a, const std::vector<double>& b,
                 const std::vector<double>& c, const std::vector<double>& d) {
    const double ma = median(a), mb = median(b), mc = median(c), md = median(d);
    std::printf("%-31s %-4s | %9.2f | %9.2f | %11.2f | %11.2f | %5.2fx | %5.2fx\n", what, clock, ma, mb, mc, md, mc / ma,
                md / mb);
  };
  row("wall", fs.fwd, fs.both, cs.fwd, cs.both);
  row("cpu", fs.cfwd, fs.cboth, cs.cfwd, cs.cboth);
  std::printf("%-36s   (page faults per timed run: fused %ld, composition %ld)\n", "", fs.faults / reps,
              cs.faults / reps);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  set_num_threads(threads);
  std::printf("fused ops vs compositions, %d thread(s), median of %d runs (ms; cpu = process CPU time)\n", threads,
              reps);
  std::printf("%-36s | %9s | %9s | %11s | %11s | %6s | %6s\n", "op", "fused fwd", "fused f+b", "compos. fwd",
              "compos. f+b", "fwd", "f+b");
  Generator g(1);
  {  // cross-entropy: the reduction to a scalar is part of both
    const int64_t N = 2048, V = 10000;
    Tensor x = randn({N, V}, Options(kFloat32).requires_grad(), &g);
    Tensor t = randint(0, V, {N}, kInt64, &g);
    time_pair("cross-entropy [2048, 10000] f32", reps, [&] { return cross_entropy(x, t); },
              [&] { return nn::cross_entropy_reference(x, t); }, {x});
  }
  {  // RMSNorm: backward from a fixed random cotangent
    const int64_t N = 2048, C = 512;
    Tensor x = randn({N, C}, Options(kFloat32).requires_grad(), &g);
    Tensor w = randn({C}, Options(kFloat32).requires_grad(), &g);
    Tensor cot = randn({N, C}, kFloat32, &g);
    time_pair("RMSNorm [2048, 512] f32", reps, [&] { return rms_norm(x, w, 1e-5); },
              [&] { return x * rsqrt(mean(x * x, {-1}, true) + 1e-5) * w; }, {x, w}, cot);
  }
  {
    const int64_t N = 2048, F = 1344;
    Tensor a = randn({N, F}, Options(kFloat32).requires_grad(), &g);
    Tensor b = randn({N, F}, Options(kFloat32).requires_grad(), &g);
    Tensor cot = randn({N, F}, kFloat32, &g);
    time_pair("SwiGLU gate [2048, 1344] f32", reps, [&] { return swiglu(a, b); },
              [&] { return silu(a) * b; }, {a, b}, cot);
  }
  return 0;
}
