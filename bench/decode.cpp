// decode.cpp — text generation at batch 1 on one device: a randomly initialised TransformerLM of a
// training config (gpt2s: V 50304, d 768, 12 layers, 12 heads, d_ff 2048), a prompt of --prompt
// tokens, then --tokens new tokens, greedy, with the KV cache (lm::generate, what `tapegrad generate`
// runs). Beside it, the limit a decode step cannot beat: every step reads every matmul weight once,
//   limit tok/s = copy bandwidth ÷ weight bytes per token
//   weight bytes per token = (L·(4d² + 3d·d_ff) + d·V) × (2 in bf16, 4 in fp32)
// with the copy bandwidth measured in the same run (a device-to-device copy of 2 × 256 MiB; bytes read
// + bytes written, per second). Under --precision bf16 the weights' bf16 copies are kept between steps
// (nn::CastCacheGuard, held by lm::generate), so the weights read per token are the bf16 ones.
// On a GPU the decode steps are timed twice, side by side: replayed as one CUDA graph per step (what
// generate does by default: lm/graph_decoder.h) and eager (--cuda-graph off), to show what the graph saves.
// Sampled decoding (the token drawn on the device inside the graph: autograd sample_token) is timed too, with
// top-k 50 and with `generate`'s default top-p 0.95 at temperature 0.8. The model is untrained, so its logits are
// nearly flat and top-p keeps most of the vocabulary: the device sampler's worst case (one chunk per 512 kept
// tokens), not what a trained model costs.
// The peer: shared/bench/torch_lm_modern.py --gen 256 (PyTorch with a KV cache), run beside it by
// scripts/gpu_check.sh.
//
// Usage: bench_decode [--device cuda|cpu] [--config gpt2s|tiny] [--precision bf16|fp32] [--tokens 256]
//                     [--prompt 16] [--reps 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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
#include "lm/generate.h"
#include "nn/precision.h"
#include "nn/transformer_lm.h"

using namespace tapegrad;
using Clock = std::chrono::steady_clock;

namespace {

using tapegrad::bench::median;

struct DecodeConfig {
  const char* name;
  int64_t vocab, context, d_model, layers, heads, d_ff;
};
constexpr DecodeConfig kConfigs[] = {{"tiny", 10000, 256, 512, 4, 16, 1344}, {"gpt2s", 50304, 1024, 768, 12, 12, 2048}};

int usage(const char* why) {
  std::fprintf(stderr,
               "bench_decode: %s\nusage: bench_decode [--device cuda|cpu] [--config gpt2s|tiny] [--precision bf16|fp32] "
               "[--tokens 256] [--prompt 16] [--reps 3]\n",
               why);
  return 2;
}

// Bytes read + written per second by a device-to-device copy of 256 MiB (median of 5 after one warm-up).
double copy_bandwidth(Device device, kernels::Backend& be) {
  const int64_t n = int64_t(64) << 20;  // float32 elements: 256 MiB
  const Tensor src = zeros({n}, Options().device(device));
  Tensor dst = empty({n}, Options().device(device));
  std::vector<double> t;
  for (int r = 0; r < 6; ++r) {
    be.synchronize();
    const auto t0 = Clock::now();
    dst.copy_(src);
    be.synchronize();
    if (r > 0) t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return 2.0 * double(n) * sizeof(float) / median(t);
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cuda", config = "gpt2s", precision_name = "bf16";
  int64_t tokens = 256, prompt_len = 16;
  int reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(("missing value after " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--device") device_name = v;
    else if (a == "--config") config = v;
    else if (a == "--precision") precision_name = v;
    else if (a == "--tokens") tokens = std::atoll(v.c_str());
    else if (a == "--prompt") prompt_len = std::atoll(v.c_str());
    else if (a == "--reps") reps = std::atoi(v.c_str());
    else return usage(("unknown flag " + a).c_str());
  }
  const DecodeConfig* c = nullptr;
  for (const DecodeConfig& k : kConfigs)
    if (config == k.name) c = &k;
  if (c == nullptr) return usage(("unknown config " + config).c_str());
  if (tokens < 1 || prompt_len < 1 || prompt_len + tokens > c->context || reps < 1)
    return usage("need --tokens ≥ 1, --prompt ≥ 1, prompt + tokens ≤ the context, --reps ≥ 1");
  try {
    const Device device = parse_device(device_name);
    kernels::Backend& be = kernels::backend(device);
    const nn::Precision precision = nn::parse_precision(precision_name, "--precision");
    if (precision == nn::Precision::TF32) return usage("--precision: bf16 or fp32");
    const bool bf16 = precision == nn::Precision::BF16;
    Generator gen(0);
    nn::TransformerLMConfig cfg;
    cfg.vocab_size = c->vocab, cfg.context_length = c->context, cfg.d_model = c->d_model;
    cfg.n_layers = c->layers, cfg.n_heads = c->heads, cfg.n_kv_heads = c->heads, cfg.d_ff = c->d_ff;
    nn::TransformerLM model(cfg, &gen);
    model.to(device);
    const nn::PrecisionGuard guard(precision);
    std::vector<uint32_t> prompt;
    for (int64_t i = 0; i < prompt_len; ++i) prompt.push_back(uint32_t((i * 7919 + 13) % c->vocab));
    lm::GenerateOptions o;
    o.max_tokens = tokens;
    o.sampling.greedy = true;
    {  // warm-up: the allocator's cache, cuBLAS's heuristics, the weights' bf16 copies
      lm::GenerateOptions w = o;
      w.max_tokens = 8;
      lm::generate(model, prompt, w);
    }
    std::vector<double> decode_tps, eager_tps, prefill_ms, top_k_tps, top_p_tps;
    int64_t produced = 0, graph_steps = 0;
    const auto sampled_tok_s = [&](int64_t top_k, double top_p, double temperature) {
      lm::GenerateOptions s = o;
      s.cuda_graph = true;
      s.sampling.greedy = false, s.sampling.top_k = top_k, s.sampling.top_p = top_p;
      s.sampling.temperature = temperature;
      const lm::GenerateResult res = lm::generate(model, prompt, s);
      return double(res.decode_tokens) / res.decode_seconds;
    };
    for (int r = 0; r < reps; ++r) {  // graph and eager alternate, so drift hits both alike
      o.cuda_graph = true;
      const lm::GenerateResult res = lm::generate(model, prompt, o);
      decode_tps.push_back(double(res.decode_tokens) / res.decode_seconds);
      prefill_ms.push_back(res.prefill_seconds * 1e3);
      produced = int64_t(res.tokens.size());
      graph_steps = res.graph_steps;
      o.cuda_graph = false;
      const lm::GenerateResult eager = lm::generate(model, prompt, o);
      eager_tps.push_back(double(eager.decode_tokens) / eager.decode_seconds);
      top_k_tps.push_back(sampled_tok_s(50, 1.0, 1.0));
      top_p_tps.push_back(sampled_tok_s(0, 0.95, 0.8));
    }
    const double bw = copy_bandwidth(device, be);
    const int64_t n_mm = c->layers * (4 * c->d_model * c->d_model + 3 * c->d_model * c->d_ff) + c->d_model * c->vocab;
    const double weight_bytes = double(n_mm) * (bf16 ? 2.0 : 4.0);
    const double limit = bw / weight_bytes;
    const double tps = median(decode_tps);
    std::printf("tapegrad decode | device %s | config %s (%lld matmul parameters) | precision %s | prompt %lld, new %lld\n",
                device.str().c_str(), c->name, (long long)n_mm, nn::precision_name(precision), (long long)prompt_len,
                (long long)produced);
    std::printf("%-22s %12s\n", "measure", "value");
    std::printf("%-22s %12.0f%s\n", "decode tok/s (median)", tps, graph_steps > 0 ? "  (CUDA graph per step)" : "");
    std::printf("%-22s %12.0f\n", "eager decode tok/s", median(eager_tps));
    std::printf("%-22s %12.0f\n", "sampled top-k 50 tok/s", median(top_k_tps));
    std::printf("%-22s %12.0f  (T 0.8; near-flat untrained logits: the sampler's worst case)\n",
                "sampled top-p .95 tok/s", median(top_p_tps));
    std::printf("%-22s %12.2f\n", "prefill ms (median)", median(prefill_ms));
    std::printf("%-22s %12.1f\n", "copy GB/s (r+w)", bw / 1e9);
    std::printf("%-22s %12.1f\n", "weight MB per token", weight_bytes / 1e6);
    std::printf("%-22s %12.0f\n", "limit tok/s", limit);
    std::printf("%-22s %11.1f%%\n", "of the limit", 100.0 * tps / limit);
    std::printf(
        "RESULT {\"impl\": \"tapegrad\", \"kind\": \"decode\", \"device\": \"%s\", \"config\": \"%s\", \"precision\": "
        "\"%s\", \"tokens\": %lld, \"decode_tok_s\": %.1f, \"prefill_ms\": %.3f, \"copy_gbs\": %.1f, "
        "\"weight_mb_per_token\": %.1f, \"limit_tok_s\": %.0f, \"graph_steps\": %lld, \"eager_decode_tok_s\": %.1f, "
        "\"sampled_top_k_tok_s\": %.1f, \"sampled_top_p_tok_s\": %.1f}\n",
        device.str().c_str(), c->name, nn::precision_name(precision), (long long)produced, tps, median(prefill_ms),
        bw / 1e9, weight_bytes / 1e6, limit, (long long)graph_steps, median(eager_tps), median(top_k_tps),
        median(top_p_tps));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_decode: %s\n", e.what());
    return 1;
  }
  return 0;
}
