// attention.cpp — causal attention forward and forward + backward at the model shapes of the training
// benchmark, in TFLOP/s, to put beside PyTorch's scaled_dot_product_attention (bench/torch_attention.py)
// in the same run on the GPU machine (scripts/gpu_check.sh).
//
//   shape    B   H   T     D    (the attention of bench_train's configs: heads = d_model / D)
//   tiny     8   16  256   32
//   tinyB64  64  16  256   32
//   gpt2s    16  12  1024  64
// q, k, v are [B, T, H, D] tensors seen as [B, H, T, D] (a transpose view, as nn/attention.cpp makes
// them). FLOPs, the convention of the FlashAttention papers, halved for the causal mask:
//   forward  4·B·H·T²·D / 2      (S = Q·Kᵀ and O = P·V)
//   backward 2.5 × forward       (S again, dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q)
// Times are medians of --reps runs after 3 warm-ups, each ended by a device synchronisation. Which
// kernel runs on the GPU is the backend's choice for the dtype and shape; TAPEGRAD_CUDA_ATTENTION=tc|simt
// forces one (read once, at the first CUDA call), and the row's "kernel" column repeats it.
//
// Usage: bench_attention [--device cuda|cpu] [--precision bf16|fp32] [--shapes tiny,tinyB64,gpt2s] [--reps 20]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
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
#include "kernels/error.h"

using namespace tapegrad;
using Clock = std::chrono::steady_clock;

namespace {

using tapegrad::bench::median;

struct AttentionShape {
  const char* name;
  int64_t B, H, T, D;
};
constexpr AttentionShape kShapes[] = {
    {"tiny", 8, 16, 256, 32}, {"tinyB64", 64, 16, 256, 32}, {"gpt2s", 16, 12, 1024, 64}};

int usage(const char* why) {
  std::fprintf(stderr,
               "bench_attention: %s\nusage: bench_attention [--device cuda|cpu] [--precision bf16|fp32] "
               "[--shapes tiny,tinyB64,gpt2s] [--reps 20]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cuda", precision = "bf16", shapes = "tiny,tinyB64,gpt2s";
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(("missing value after " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--device") device_name = v;
    else if (a == "--precision") precision = v;
    else if (a == "--shapes") shapes = v;
    else if (a == "--reps") reps = std::atoi(v.c_str());
    else return usage(("unknown flag " + a).c_str());
  }
  if (precision != "bf16" && precision != "fp32") return usage("--precision must be bf16 or fp32");
  if (reps < 1) return usage("--reps must be at least 1");
  try {
    const Device device = parse_device(device_name);
    kernels::Backend& be = kernels::backend(device);
    const DType dtype = precision == "bf16" ? kBFloat16 : kFloat32;
    const char* forced = std::getenv("TAPEGRAD_CUDA_ATTENTION");
    const std::string kernel = device.type == DeviceType::CUDA ? (forced ? forced : "default") : "cpu";
    std::printf("%-8s %-9s %-8s %4s %3s %5s %4s %10s %10s %12s %12s\n", "shape", "device", "kernel", "B", "H", "T", "D",
                "fwd ms", "fwd+bwd ms", "fwd TFLOP/s", "f+b TFLOP/s");
    std::stringstream names(shapes);
    for (std::string name; std::getline(names, name, ',');) {
      const AttentionShape* s = nullptr;
      for (const AttentionShape& c : kShapes)
        if (name == c.name) s = &c;
      if (s == nullptr) return usage(("unknown shape " + name).c_str());
      Generator gen(1);
      auto make = [&]() {
        Tensor t = randn({s->B, s->T, s->H, s->D}, {}, &gen).to(dtype).to(device).transpose(1, 2);
        t.requires_grad_();
        return t;
      };
      Tensor q = make(), k = make(), v = make();
      const Tensor cot = randn({s->B, s->H, s->T, s->D}, {}, &gen).to(dtype).to(device);
      const double scale = 1.0 / std::sqrt(double(s->D));
      std::vector<double> fwd, both;
      for (int r = 0; r < reps + 3; ++r) {
        be.synchronize();
        auto t0 = Clock::now();
        {
          NoGradGuard no_grad;
          Tensor o = causal_attention(q, k, v, scale);
          be.synchronize();
        }
        const double f = std::chrono::duration<double>(Clock::now() - t0).count();
        q.zero_grad(), k.zero_grad(), v.zero_grad();
        be.synchronize();
        t0 = Clock::now();
        causal_attention(q, k, v, scale).backward(cot);
        be.synchronize();
        const double fb = std::chrono::duration<double>(Clock::now() - t0).count();
        if (r >= 3) fwd.push_back(f), both.push_back(fb);
      }
      const double flops_fwd = 4.0 * double(s->B * s->H) * double(s->T) * double(s->T) * double(s->D) / 2;
      const double flops_both = 3.5 * flops_fwd;
      const double mf = median(fwd), mb = median(both);
      std::printf("%-8s %-9s %-8s %4lld %3lld %5lld %4lld %10.3f %10.3f %12.2f %12.2f\n", s->name,
                  device.str().c_str(), kernel.c_str(), (long long)s->B, (long long)s->H, (long long)s->T,
                  (long long)s->D, mf * 1e3, mb * 1e3, flops_fwd / mf / 1e12, flops_both / mb / 1e12);
      std::printf(
          "RESULT {\"impl\": \"tapegrad\", \"kernel\": \"%s\", \"shape\": \"%s\", \"device\": \"%s\", \"precision\": "
          "\"%s\", \"fwd_ms\": %.4f, \"fwd_bwd_ms\": %.4f, \"fwd_tflops\": %.3f, \"fwd_bwd_tflops\": %.3f}\n",
          kernel.c_str(), s->name, device.str().c_str(), precision.c_str(), mf * 1e3, mb * 1e3, flops_fwd / mf / 1e12,
          flops_both / mb / 1e12);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_attention: %s\n", e.what());
    return 1;
  }
  return 0;
}
