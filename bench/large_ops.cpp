// large_ops.cpp — throughput of tapegrad's large ops against the machine's own ceilings,
// measured in the same binary, with the same thread count:
//
//  (a) matmul, n×n fp32 (n = 2048): A, B require grad; Y = A @ B; Y.backward(G) with an explicit
//      gradient G — 3 GEMMs (Y = AB, dA = G Bᵀ, dB = Aᵀ G). GFLOP/s = 3·2·n³ / time.
//      Ceiling: raw cblas_sgemm(n, n, n) GFLOP/s = 2·n³ / time. Ratio = ours / sgemm.
//      Also reported: the forward alone (NoGradGuard) and the backward alone.
//  (b) memory-bound ops on 16M floats (16·2²⁰, 64 MiB per tensor), forward, no grad:
//      add, mul (2 in, 1 out), exp (1 in, 1 out), sum of all, sum over the last dim of
//      [4096, 4096], max of all (1 in, ~0 out). GB/s = (bytes read + bytes written) / time.
//      Ceiling: memcpy of 64 MiB split across the same threads (OpenMP static halves), to a
//      destination touched beforehand; GB/s = 2·64 MiB / time. Ratio = ours / copy.
//
// Every figure is the median of `reps` timed runs after one untimed warm-up run; each ceiling is
// timed interleaved with the ops it is compared to (one of each per repetition), so that load
// from elsewhere on a shared machine moves both alike. Each thread count in the list runs
// everything (kernels::set_num_threads sets OpenMP and OpenBLAS).
//
// Usage: bench_large [--threads 1,2] [--reps 9] [--n 2048] [--numel 16777216] [--only matmul|mem]
// Ends with one line `RESULT {json}` (what bench/run.sh parses).
#include <cblas.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tapegrad.h"
#include "bench/bench_stats.h"
#include "kernels/backend.h"

using namespace tapegrad;
using Clock = std::chrono::steady_clock;

namespace {

using tapegrad::bench::median;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// CPU time of the whole process (all threads), for "effective threads" = CPU time / wall time:
// on a shared machine a 2-thread run that gets only one core's worth of time shows ~1.0.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    char* end;
    const long x = std::strtol(p, &end, 10);
    if (end == p) break;
    v.push_back(static_cast<int>(x));
    p = *end == ',' ? end + 1 : end;
  }
  return v;
}

// Buffers for the ceilings, allocated as tapegrad's CPU allocator allocates large blocks
// (2 MiB-aligned, advised as transparent huge pages), so the ceiling and our ops see the same
// TLB behaviour, and written once before timing.
float* alloc_floats(size_t n) {
  constexpr size_t kAlign = size_t{2} << 20;
  const size_t bytes = (n * sizeof(float) + kAlign - 1) / kAlign * kAlign;
  auto* p = static_cast<float*>(std::aligned_alloc(kAlign, bytes));
  if (!p) std::abort();
  madvise(p, bytes, MADV_HUGEPAGE);
  std::memset(p, 0, bytes);
  return p;
}

volatile float g_sink;  // keeps results observable

struct MatmulResult {
  double sgemm_gflops, fwd_bwd_gflops, fwd_gflops, bwd_gflops, fwd_bwd_ms, sgemm_ms, cpu_per_wall;
};

MatmulResult bench_matmul(int64_t n, int reps) {
  // The ceiling and our op are timed interleaved (sgemm, fwd+bwd, fwd in every repetition), so
  // that a slow drift in what else the machine is doing moves both alike.
  const double flop = 2.0 * double(n) * double(n) * double(n);
  const size_t nn = static_cast<size_t>(n * n);
  float *rA = alloc_floats(nn), *rB = alloc_floats(nn), *rC = alloc_floats(nn);
  for (size_t i = 0; i < nn; ++i) {
    rA[i] = float((i * 2654435761u) % 1000) / 1000.f - 0.5f;
    rB[i] = float((i * 40503u) % 1000) / 1000.f - 0.5f;
    rC[i] = 0.f;
  }
  manual_seed(0);
  Tensor A = randn({n, n}, Options().requires_grad());
  Tensor B = randn({n, n}, Options().requires_grad());
  Tensor G = randn({n, n});
  const int ni = static_cast<int>(n);
  std::vector<double> ts, tb, tt, tf;
  double cpu0 = 0;
  Clock::time_point wall0;
  for (int rep = 0; rep <= reps; ++rep) {  // rep 0: warm-up
    if (rep == 1) cpu0 = process_cpu_seconds(), wall0 = Clock::now();
    // raw cblas_sgemm, row-major NN, into a buffer written before (as the ceiling)
    auto t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.f, rA, ni, rB, ni, 0.f, rC, ni);
    const double s_sgemm = seconds(t0, Clock::now());
    // ours: forward + backward with an explicit gradient
    A.zero_grad(), B.zero_grad();
    t0 = Clock::now();
    double s_bwd, s_tot;
    {
      Tensor Y = matmul(A, B);
      const auto t1 = Clock::now();
      Y.backward(G);
      const auto t2 = Clock::now();
      s_bwd = seconds(t1, t2), s_tot = seconds(t0, t2);
    }
    // ours: forward alone, no grad
    double s_fwd;
    {
      NoGradGuard ng;
      t0 = Clock::now();
      Tensor Y = matmul(A, B);
      s_fwd = seconds(t0, Clock::now());
      g_sink = Y.data<float>()[5];
    }
    if (rep == 0) continue;
    ts.push_back(s_sgemm), tb.push_back(s_bwd), tt.push_back(s_tot), tf.push_back(s_fwd);
  }
  const double cpu_per_wall = (process_cpu_seconds() - cpu0) / seconds(wall0, Clock::now());
  g_sink = rC[nn / 3] + A.grad().data<float>()[7] + B.grad().data<float>()[11];
  std::free(rA), std::free(rB), std::free(rC);
  MatmulResult r{};
  r.sgemm_gflops = flop / median(ts) / 1e9;
  r.sgemm_ms = median(ts) * 1e3;
  r.fwd_bwd_gflops = 3 * flop / median(tt) / 1e9;
  r.fwd_bwd_ms = median(tt) * 1e3;
  r.bwd_gflops = 2 * flop / median(tb) / 1e9;
  r.fwd_gflops = flop / median(tf) / 1e9;
  r.cpu_per_wall = cpu_per_wall;
  return r;
}

struct MemOp {
  std::string name;
  double bytes;  // read + written per call
  std::function<Tensor()> run;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2};
  int reps = 9;
  int64_t n = 2048, numel = int64_t{16} << 20;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--threads" && v) threads = parse_list(v), ++i;
    else if (a == "--reps" && v) reps = std::atoi(v), ++i;
    else if (a == "--n" && v) n = std::atoll(v), ++i;
    else if (a == "--numel" && v) numel = std::atoll(v), ++i;
    else if (a == "--only" && v) only = v, ++i;
    else {
      std::fprintf(stderr,
                   "usage: bench_large [--threads 1,2] [--reps 9] [--n 2048] [--numel 16777216] [--only matmul|mem]\n");
      return 2;
    }
  }
  if (threads.empty() || reps < 1 || n < 1 || numel < 4096 || numel % 4096) {
    std::fprintf(stderr, "bench_large: bad arguments (numel must be a multiple of 4096)\n");
    return 2;
  }
  const bool do_mm = only.empty() || only == "matmul", do_mem = only.empty() || only == "mem";
  std::printf("tapegrad large ops | OpenBLAS core %s (parallel model %d) | median of %d reps after 1 warm-up\n",
              kernels::blas_core_name(), kernels::blas_parallel_model(), reps);

  const int64_t rows = numel / 4096;
  const double fbytes = double(numel) * sizeof(float);
  Tensor x, y;
  if (do_mem) {
    manual_seed(1);
    x = randn({numel});
    y = rand({numel});  // U[0,1): finite products, no denormals
  }
  std::string json;
  for (int t : threads) {
    kernels::set_num_threads(t);
    char buf[1024];
    std::string tj;
    if (do_mm) {
      const MatmulResult m = bench_matmul(n, reps);
      const double ratio = m.fwd_bwd_gflops / m.sgemm_gflops;
      std::printf("\n[threads %d] matmul %lld x %lld fp32\n", kernels::num_threads(), (long long)n, (long long)n);
      std::printf("  %-34s%10.1f GFLOP/s  (%.1f ms)\n", "cblas_sgemm (ceiling)", m.sgemm_gflops, m.sgemm_ms);
      std::printf("  %-34s%10.1f GFLOP/s  (%.1f ms)  = %.1f%% of sgemm  [target >= 90%%]\n",
                  "matmul fwd+bwd (3 GEMMs)", m.fwd_bwd_gflops, m.fwd_bwd_ms, 100 * ratio);
      std::printf("  %-34s%10.1f GFLOP/s\n", "  forward only (no grad)", m.fwd_gflops);
      std::printf("  %-34s%10.1f GFLOP/s\n", "  backward only (2 GEMMs)", m.bwd_gflops);
      std::printf("  effective threads (process CPU time / wall time): %.2f\n", m.cpu_per_wall);
      std::snprintf(buf, sizeof buf,
                    "\"sgemm_gflops\":%.2f,\"matmul_fwd_bwd_gflops\":%.2f,\"matmul_fwd_gflops\":%.2f,"
                    "\"matmul_bwd_gflops\":%.2f,\"matmul_ratio\":%.4f,\"matmul_cpu_per_wall\":%.3f",
                    m.sgemm_gflops, m.fwd_bwd_gflops, m.fwd_gflops, m.bwd_gflops, ratio, m.cpu_per_wall);
      tj += buf;
    }
    if (do_mem) {
      // memcpy ceiling: each OpenMP thread copies its static share (64-byte aligned chunks) to a
      // destination written before. Timed interleaved with the ops: in every repetition the
      // copy runs once, then each op once; each figure is the median over repetitions.
      float *src = alloc_floats(static_cast<size_t>(numel)), *dst = alloc_floats(static_cast<size_t>(numel));
      std::memcpy(src, x.data<float>(), static_cast<size_t>(fbytes));
      const size_t total = static_cast<size_t>(fbytes);
      auto copy = [&] {
#pragma omp parallel num_threads(t)
        {
          const size_t T = static_cast<size_t>(omp_get_num_threads()), i = static_cast<size_t>(omp_get_thread_num());
          const size_t chunk = (total / T + 63) / 64 * 64, b = std::min(total, i * chunk),
                       e = std::min(total, b + chunk);
          if (b < e)
            std::memcpy(reinterpret_cast<char*>(dst) + b, reinterpret_cast<const char*>(src) + b, e - b);
        }
      };
      NoGradGuard ng;
      const Tensor x2 = x.view({rows, 4096});
      const std::vector<MemOp> ops = {
          {"add", 3 * fbytes, [&] { return x + y; }},
          {"mul", 3 * fbytes, [&] { return x * y; }},
          {"exp", 2 * fbytes, [&] { return exp(x); }},
          {"sum_all", fbytes + 4, [&] { return sum(x); }},
          {"sum_lastdim", fbytes + 4.0 * rows, [&] { return sum(x2, {-1}); }},
          {"max_all", fbytes + 4, [&] { return max(x); }},
      };
      std::vector<double> tcopy;
      std::vector<std::vector<double>> tops(ops.size());
      double cpu0 = 0;
      Clock::time_point wall0;
      for (int rep = 0; rep <= reps; ++rep) {  // rep 0: warm-up
        if (rep == 1) cpu0 = process_cpu_seconds(), wall0 = Clock::now();
        auto t0 = Clock::now();
        copy();
        const double sc = seconds(t0, Clock::now());
        if (rep) tcopy.push_back(sc);
        for (size_t k = 0; k < ops.size(); ++k) {
          t0 = Clock::now();
          Tensor r = ops[k].run();
          const double so = seconds(t0, Clock::now());
          g_sink = r.data<float>()[0];
          if (rep) tops[k].push_back(so);
        }
      }
      const double mem_cpu_per_wall = (process_cpu_seconds() - cpu0) / seconds(wall0, Clock::now());
      g_sink = dst[12345];
      std::free(src), std::free(dst);
      const double tc = median(tcopy);
      const double copy_gbs = 2 * fbytes / tc / 1e9;
      std::printf("\n[threads %d] memory-bound ops on %lld floats (%.0f MiB per tensor); sum_lastdim is [%lld, 4096]\n",
                  kernels::num_threads(), (long long)numel, fbytes / (1 << 20), (long long)rows);
      std::printf("  %-14s%10s%10s%10s\n", "op", "ms", "GB/s", "% copy");
      std::printf("  %-14s%10.2f%10.2f%10s\n", "memcpy", tc * 1e3, copy_gbs, "100.0");
      std::printf("  effective threads (process CPU time / wall time): %.2f\n", mem_cpu_per_wall);
      std::snprintf(buf, sizeof buf, "%s\"copy_gbs\":%.3f,\"mem_cpu_per_wall\":%.3f,\"ops\":{", tj.empty() ? "" : ",",
                    copy_gbs, mem_cpu_per_wall);
      tj += buf;
      for (size_t k = 0; k < ops.size(); ++k) {
        const MemOp& op = ops[k];
        const double s = median(tops[k]);
        const double gbs = op.bytes / s / 1e9;
        std::printf("  %-14s%10.2f%10.2f%10.1f\n", op.name.c_str(), s * 1e3, gbs, 100 * gbs / copy_gbs);
        std::snprintf(buf, sizeof buf, "%s\"%s\":{\"ms\":%.4f,\"gbs\":%.3f,\"ratio_copy\":%.4f}", k ? "," : "",
                      op.name.c_str(), s * 1e3, gbs, gbs / copy_gbs);
        tj += buf;
      }
      tj += "}";
    }
    json += (json.empty() ? "\"" : ",\"") + std::to_string(t) + "\":{" + tj + "}";
  }
  std::printf("RESULT {\"lib\":\"tapegrad\",\"blas_core\":\"%s\",\"n\":%lld,\"numel\":%lld,\"reps\":%d,\"threads\":{%s}}\n",
              kernels::blas_core_name(), (long long)n, (long long)numel, reps, json.c_str());
  return 0;
}
