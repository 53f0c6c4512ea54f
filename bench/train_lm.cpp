// train_lm.cpp — bench_train: one full training step of the TransformerLM (zero_grad, forward,
// cross-entropy, backward, AdamW) timed on the configs of shared/bench/README.md, the twin of
// shared/bench/torch_lm.py (same model, same optimizer settings, same FLOP count, same output).
//
//   bench_train --config micro|small|tiny|tinyB64|gpt2s [--threads N] [--steps 10] [--warmup 3] [--sgemm-n 2048]
//               [--device cpu|cuda] [--tf32 0|1] [--precision fp32|bf16]
//
// On the GPU (--device cuda, a build with the CUDA backend) the model, optimizer state and batches live
// on cuda:0, each phase ends with a synchronisation so its time is the GPU's, the ceiling is our own
// n×n×n float32 matmul on the device (cuBLAS; lm::measure_matmul_gflops), peak GPU memory is the caching
// allocator's, and --tf32 1 lets cuBLAS use TF32 tensor cores for float32 matmuls (the twin of
// torch_lm_modern.py's fp32 / tf32 modes; configs tinyB64 and gpt2s are its GPU configs). --precision bf16
// runs the steps under nn::PrecisionGuard(BF16) (bf16 matmuls and attention, float32 master weights: the
// twin of its bf16 mode) and measures the ceiling as a bf16 matmul.
//
// Model: token embedding → L × [RMSNorm → causal MHA with RoPE → residual; RMSNorm → SwiGLU →
// residual] → RMSNorm → untied LM head; AdamW(lr 1e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.1);
// uniform random tokens (B, T+1) per step, inputs = [:, :-1], targets = [:, 1:].
// FLOPs per token (PaLM-style, as torch_lm.py): F = 6·N_mm + 12·L·T·C with
//   N_mm = L·(4C² + 3·C·d_ff) + C·V (every matmul weight incl. the LM head).
// Achieved GFLOP/s = tokens/s · F. The ceiling: raw cblas_sgemm (n × n × n) GFLOP/s at the same
// thread count, timed after training so it does not count in the peak RSS (read from getrusage
// before the sgemm runs). Prints a summary and a last line `RESULT {json}`.
#include <cblas.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "bench/bench_stats.h"
#include "kernels/backend.h"
#include "kernels/device_memory.h"
#include "kernels/error.h"
#include "lm/throughput.h"
#include "nn/loss.h"
#include "nn/precision.h"
#include "nn/transformer_lm.h"
#include "optim/adamw.h"

using namespace tapegrad;
using Clock = std::chrono::steady_clock;

namespace {

using tapegrad::bench::median;

struct BenchConfig {
  int64_t vocab, context, d_model, layers, heads, d_ff, batch;
};

const std::map<std::string, BenchConfig> kConfigs = {
    {"micro", {512, 64, 64, 2, 4, 172, 32}},
    {"small", {10000, 128, 256, 4, 8, 688, 16}},
    {"tiny", {10000, 256, 512, 4, 16, 1344, 8}},
    {"tinyB64", {10000, 256, 512, 4, 16, 1344, 64}},
    {"gpt2s", {50304, 1024, 768, 12, 12, 2048, 16}},
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// Median GFLOP/s of cblas_sgemm n×n×n (row-major, NN) over `reps` runs after one warm-up.
double sgemm_gflops(int n, int reps) {
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n, 0.f);
  std::vector<double> t;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    if (r > 0) t.push_back(seconds_since(t0));
  }
  return 2.0 * n * n * double(n) / median(t) / 1e9;
}

int usage(const char* why) {
  std::fprintf(stderr, "bench_train: %s\nusage: bench_train --config micro|small|tiny|tinyB64|gpt2s [--threads N] "
               "[--steps 10] [--warmup 3] [--sgemm-n 2048] [--device cpu|cuda] [--tf32 0|1] [--precision fp32|bf16]\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_name = "small";
  int threads = 1, steps = 10, warmup = 3, sgemm_n = 2048, tf32 = 0;
  std::string device_name = "cpu", precision_name = "fp32";
  for (int i = 1; i < argc; i += 2) {  // --option value pairs
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) return usage(("missing value after " + a).c_str());
    if (a == "--config") config_name = v;
    else if (a == "--threads") threads = std::atoi(v);
    else if (a == "--steps") steps = std::atoi(v);
    else if (a == "--warmup") warmup = std::atoi(v);
    else if (a == "--sgemm-n") sgemm_n = std::atoi(v);
    else if (a == "--device") device_name = v;
    else if (a == "--tf32") tf32 = std::atoi(v);
    else if (a == "--precision") precision_name = v;
    else return usage(("unknown option " + a).c_str());
  }
  const auto it = kConfigs.find(config_name);
  if (it == kConfigs.end()) return usage(("unknown config " + config_name).c_str());
  if (threads < 1 || steps < 1 || warmup < 0 || sgemm_n < 64) return usage("bad numeric option");
  const BenchConfig c = it->second;

  try {
    kernels::set_num_threads(threads);
    const Device device = parse_device(device_name);
    kernels::Backend& be = kernels::backend(device);  // throws when this build or machine has no such device
    const bool gpu = device.type == DeviceType::CUDA;
    if (gpu) kernels::set_cuda_allow_tf32(tf32 != 0);
    if (tf32 && !gpu) return usage("--tf32 needs --device cuda");
    const nn::Precision precision = nn::parse_precision(precision_name, "--precision");
    if (precision == nn::Precision::TF32) return usage("--precision tf32: use --tf32 1");
    const nn::PrecisionGuard precision_guard(precision);
    const bool bf16 = precision == nn::Precision::BF16;
    Generator gen(0);
    nn::TransformerLMConfig cfg;
    cfg.vocab_size = c.vocab, cfg.context_length = c.context, cfg.d_model = c.d_model;
    cfg.n_layers = c.layers, cfg.n_heads = c.heads, cfg.n_kv_heads = c.heads, cfg.d_ff = c.d_ff;
    nn::TransformerLM model(cfg, &gen);
    model.to(device);
    optim::AdamW opt(model.parameters(), optim::AdamWOptions(1e-3).betas(0.9, 0.95).eps(1e-8).weight_decay(0.1));

    const int64_t n_mm = c.layers * (4 * c.d_model * c.d_model + 3 * c.d_model * c.d_ff) + c.d_model * c.vocab;
    const double flops_per_token = 6.0 * double(n_mm) + 12.0 * double(c.layers * c.context * c.d_model);
    const int64_t tokens_per_step = c.batch * c.context;
    std::printf("tapegrad | device %s%s | precision %s | threads=%d OPENBLAS_CORETYPE=%s -> OpenBLAS core %s\n",
                device.str().c_str(), gpu ? (tf32 ? " (TF32 on)" : " (TF32 off)") : "", precision_name.c_str(),
                kernels::num_threads(),
                std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "(unset)",
                kernels::blas_core_name());
    std::printf("config %s: V=%lld T=%lld d=%lld L=%lld H=%lld d_ff=%lld B=%lld | parameters %lld\n",
                config_name.c_str(), (long long)c.vocab, (long long)c.context, (long long)c.d_model,
                (long long)c.layers, (long long)c.heads, (long long)c.d_ff, (long long)c.batch,
                (long long)model.num_parameters());

    std::vector<double> t_step, t_fwd, t_bwd, t_opt, losses, faults;
    for (int s = 0; s < warmup + steps; ++s) {
      Tensor data = randint(0, c.vocab, {c.batch, c.context + 1}, kInt64, &gen).to(device);
      Tensor x = data.slice(1, 0, c.context), y = data.slice(1, 1, c.context + 1);
      be.synchronize();  // the copy of the batch is not part of the step
      const long faults0 = minor_faults();
      const auto t0 = Clock::now();
      opt.zero_grad();
      Tensor logits = model(x);
      Tensor loss = nn::cross_entropy(logits, y);
      be.synchronize();  // on the GPU: wait for the queued kernels (free on the CPU)
      const double f = seconds_since(t0);
      loss.backward();
      be.synchronize();
      const double b = seconds_since(t0);
      opt.step();
      be.synchronize();
      const double total = seconds_since(t0);
      losses.push_back(loss.item<double>());
      if (s >= warmup) faults.push_back(double(minor_faults() - faults0));
      if (s >= warmup) t_step.push_back(total), t_fwd.push_back(f), t_bwd.push_back(b - f), t_opt.push_back(total - b);
    }
    const double rss = peak_rss_mib();
    const double med = median(t_step);
    const double tps = double(tokens_per_step) / med;
    const double gflops = tps * flops_per_token / 1e9;
    double gpu_peak_mib = 0.0, gpu_reserved_mib = 0.0;
    if (gpu) {
      const kernels::DeviceMemory ms = kernels::device_memory(device);
      gpu_peak_mib = double(ms.peak_allocated_bytes) / (1 << 20), gpu_reserved_mib = double(ms.reserved_bytes) / (1 << 20);
    }
    // The ceiling: on the CPU raw cblas_sgemm; on the GPU our own float32 matmul (cuBLAS, with the same
    // TF32 setting as the step) of n×n by n×n, timed after training.
    const double ceiling = gpu  ? lm::measure_matmul_gflops(sgemm_n, 10, device, bf16 ? kBFloat16 : kFloat32)
                           : bf16 ? lm::measure_matmul_gflops(sgemm_n, 5, device, kBFloat16)
                                  : sgemm_gflops(sgemm_n, 5);
    std::printf("step time: median %.1f ms (min %.1f, max %.1f) over %d steps after %d warm-up\n", med * 1e3,
                *std::min_element(t_step.begin(), t_step.end()) * 1e3,
                *std::max_element(t_step.begin(), t_step.end()) * 1e3, steps, warmup);
    std::printf("  of which fwd+loss %.1f ms, backward %.1f ms, AdamW %.1f ms (medians)\n", median(t_fwd) * 1e3,
                median(t_bwd) * 1e3, median(t_opt) * 1e3);
    if (gpu)
      std::printf("tokens/s: %.0f   model FLOPs/token %.3f M   achieved %.1f GFLOP/s = %.1f%% of matmul %d^3 (%.1f)\n"
                  "GPU memory: peak allocated %.1f MiB, reserved %.1f MiB\n",
                  tps, flops_per_token / 1e6, gflops, 100 * gflops / ceiling, sgemm_n, ceiling, gpu_peak_mib,
                  gpu_reserved_mib);
    else
      std::printf("tokens/s: %.0f   model FLOPs/token %.3f M   achieved %.1f GFLOP/s = %.1f%% of sgemm %d^3 (%.1f)\n",
                tps, flops_per_token / 1e6, gflops, 100 * gflops / ceiling, sgemm_n, ceiling);
    std::printf("loss: first %.4f last %.4f (ln V = %.4f)   peak RSS %.1f MiB   page faults per step %.0f\n",
                losses.front(), losses.back(), std::log(double(c.vocab)), rss, median(faults));
    std::printf("RESULT {\"lib\":\"tapegrad\",\"device\":\"%s\",\"precision\":\"%s\",\"tf32\":%d,\"config\":\"%s\",\"threads\":%d,\"openblas_core\":\"%s\","
                "\"steps\":%d,\"warmup\":%d,\"tokens_per_step\":%lld,\"step_s_median\":%.6f,\"fwd_s_median\":%.6f,"
                "\"bwd_s_median\":%.6f,\"opt_s_median\":%.6f,\"tokens_per_s\":%.1f,\"flops_per_token\":%.0f,"
                "\"gflops_per_s\":%.2f,\"sgemm_gflops\":%.2f,\"sgemm_n\":%d,\"loss_first\":%.6f,\"loss_last\":%.6f,"
                "\"peak_rss_mib\":%.1f,\"page_faults_per_step\":%.0f,\"gpu_peak_allocated_mib\":%.1f,\"gpu_reserved_mib\":%.1f}\n",
                device.str().c_str(), precision_name.c_str(), tf32, config_name.c_str(), kernels::num_threads(), kernels::blas_core_name(), steps, warmup,
                (long long)tokens_per_step, med, median(t_fwd), median(t_bwd), median(t_opt), tps, flops_per_token,
                gflops, ceiling, sgemm_n, losses.front(), losses.back(), rss, median(faults), gpu_peak_mib,
                gpu_reserved_mib);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
  return 0;
}
