// memory_estimate.cpp — the training memory estimate (what is counted and why: memory_estimate.h), the
// process and machine numbers it is compared with, and its table.
#include "lm/memory_estimate.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string_view>
#include <utility>

#include "kernels/device_memory.h"
#include "kernels/error.h"

namespace tapegrad::lm {

namespace {

// OpenBLAS's work buffer per thread: the packed panels of A and B that sgemm/dgemm touch (its BUFFER_SIZE
// is reserved, only these pages become resident). Measured: the peak RSS of `train` with a model too small
// for its tensors to matter, minus the RSS before training (docs/_draft_memory.md).
constexpr uint64_t kBlasBufferPerThread = uint64_t(10) << 20;
// The CUDA context, cuBLAS's handle and workspace and the kernels' modules live outside the caching
// allocator (peak_allocated_bytes does not see them); a typical size on current drivers, not a measurement.
constexpr uint64_t kCudaContextBytes = uint64_t(512) << 20;

// Bytes a tensor of `nbytes` takes from each allocator (kernels/cpu/allocator.cpp, kernels/cuda/memory.cu).
uint64_t cpu_block(uint64_t nbytes) {
  if (nbytes <= 4096) return (nbytes == 0 ? 1 : (nbytes + 63) / 64) * 64;  // 64-byte classes
  return (nbytes + 4095) / 4096 * 4096;  // medium: 4 KiB classes; large: the pages written (the rest is never touched)
}
uint64_t gpu_block(uint64_t nbytes) {
  const uint64_t round = nbytes < (uint64_t(1) << 20) ? 512 : uint64_t(2) << 20;
  return ((nbytes == 0 ? 1 : nbytes) + round - 1) / round * round;
}

// Tensors summed as each allocator holds them.
struct Ledger {
  uint64_t cpu = 0, gpu = 0;
  void add(int64_t count, int64_t elements, int64_t element_bytes) {
    const uint64_t n = uint64_t(elements) * uint64_t(element_bytes);
    cpu += uint64_t(count) * cpu_block(n);
    gpu += uint64_t(count) * gpu_block(n);
  }
  void add(const Ledger& o, int64_t count = 1) {
    cpu += uint64_t(count) * o.cpu;
    gpu += uint64_t(count) * o.gpu;
  }
};

// A line of /proc/<file> "Key:   1234 kB" in bytes (0 when absent).
uint64_t proc_kb_field(const char* file, std::string_view key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 && line[key.size()] == ':')
      return std::strtoull(line.c_str() + key.size() + 1, nullptr, 10) * 1024;
  return 0;
}

}  // namespace

MemoryEstimate estimate_training_memory(const nn::TransformerLMConfig& config, const TrainOptions& o,
                                        uint64_t host_baseline_bytes, int threads, int64_t sequence_length) {
  TG_CHECK(config.vocab_size > 0 && config.context_length > 0 && config.d_model > 0 && config.n_layers >= 0 &&
               config.n_heads > 0 && config.d_model % config.n_heads == 0,
           "memory estimate: the model config (vocab {}, context {}, d_model {}, heads {}, layers {}) is not valid",
           config.vocab_size, config.context_length, config.d_model, config.n_heads, config.n_layers);
  TG_CHECK(o.batch_size > 0 && o.grad_accum > 0, "memory estimate: --batch-size {} and --grad-accum {} must be positive",
           o.batch_size, o.grad_accum);
  const int64_t V = config.vocab_size, C = config.d_model, L = config.n_layers;
  const int64_t T = sequence_length > 0 ? std::min(sequence_length, config.context_length) : config.context_length;
  const int64_t H = config.n_heads, Hkv = config.n_kv_heads > 0 ? config.n_kv_heads : H, D = C / H;
  const int64_t F = config.d_ff > 0 ? config.d_ff : nn::default_d_ff(config.ffn, C);
  const int64_t ffn_matrices = config.ffn == nn::FFNKind::ReLU2 ? 2 : 3;  // w1, w2 (, w3)
  const int64_t s = int64_t(dtype_size(config.dtype)), B = o.batch_size, N = B * T;

  // Parameters (nn/transformer_lm.h): the embedding, per block two RMSNorm gains and seven matrices, the final
  // gain, the head unless tied. The gradients and each of AdamW's m and v have the same shapes.
  Ledger block_params;
  block_params.add(2, C, s);          // ln1, ln2
  block_params.add(2, C * C, s);      // q_proj [H·D, C], output_proj [C, H·D]
  block_params.add(2, Hkv * D * C, s);  // k_proj, v_proj
  block_params.add(ffn_matrices, F * C, s);  // w1 (, w3) [F, C], w2 [C, F]
  Ledger params;
  params.add(config.tie_embeddings ? 1 : 2, V * C, s);
  params.add(1, C, s);
  params.add(block_params, L);
  // clip_grad_norm's g⊙g, one per shape at a time (the CPU cache keeps one block of each size)
  Ledger clip;
  clip.add(1, V * C, s);
  if (L > 0) {
    clip.add(1, C * C, s);
    clip.add(Hkv != H ? 1 : 0, Hkv * D * C, s);  // k/v's own shape under GQA, else q's
    clip.add(1, F * C, s);
  }

  // Activations saved for backward (see the header's list), one micro-batch.
  Ledger block_acts;
  block_acts.add(6, N * C, s);
  block_acts.add(2, N * Hkv * D, s);
  block_acts.add(3, N * F, s);
  block_acts.add(2, N, s);      // rstd of ln1, ln2
  block_acts.add(1, N * H, s);  // attention's log-sum-exp [B, H, T]
  Ledger head_acts;
  head_acts.add(2, N * C, s);   // the last block's output (ln_final's input), ln_final's output (lm_head's input)
  head_acts.add(1, N, s);       // ln_final's rstd
  head_acts.add(1, N * V, s);   // the logits (cross_entropy's input)
  head_acts.add(1, N, 8);       // cross_entropy's lse, float64
  head_acts.add(2, N, 8);       // ids and targets, int64
  Ledger acts;
  acts.add(block_acts, L);
  acts.add(head_acts);

  // Temporaries: the logits' gradient takes no buffer of its own (cross_entropy writes it over the logits it
  // saved, autograd/ops/fused.cpp); the head's backward then makes ln_final's output gradient [N, C] and the
  // head weight's [V, C] while every activation still lives (the GPU's peak). In a block's backward the
  // gradients flowing through SwiGLU and the projections live before the activations they replace are freed
  // (on the GPU beside every activation but the logits);
  // evaluation with a larger batch than training's makes its own logits.
  Ledger head_backward;
  head_backward.add(1, N * C, s);
  head_backward.add(1, V * C, s);
  Ledger block_backward;
  if (L > 0) {
    block_backward.add(2, N * F, s);
    block_backward.add(2, N * C, s);
  }
  const int64_t eval_b = o.eval_batch_size > 0 ? o.eval_batch_size : B;
  Ledger eval_logits;
  if (eval_b > B) eval_logits.add(1, eval_b * T * V, s);

  MemoryEstimate e;
  e.parameter_count = int64_t(config.parameter_count());
  e.tokens_per_micro_batch = N;
  e.activations_per_block = block_acts.cpu;
  e.activations_after_blocks = head_acts.cpu;
  e.batch_size = B;
  e.context_length = T;
  e.rows_shorter_than_context = T < config.context_length;
  e.grad_accum = o.grad_accum;
  e.n_layers = L;
  e.dtype = config.dtype;

  // CPU: blocks are cached by size, so everything made once stays resident (the header explains).
  MemoryColumn& c = e.cpu;
  c.parameters = c.gradients = params.cpu;
  c.optimizer_state = 2 * params.cpu;
  c.activations = acts.cpu;
  c.temporaries = block_backward.cpu + clip.cpu + eval_logits.cpu;  // the head's: sizes already cached
  c.overhead = host_baseline_bytes + uint64_t(std::max(1, threads)) * kBlasBufferPerThread;
  c.total = c.parameters + c.gradients + c.optimizer_state + c.activations + c.temporaries + c.overhead;

  // GPU: the allocator's live bytes at the peak; gradients and activations are not alive together unless a
  // later micro-batch runs with the gradients of the earlier ones.
  MemoryColumn& g = e.gpu;
  g.parameters = g.gradients = params.gpu;
  g.optimizer_state = 2 * params.gpu;
  g.activations = acts.gpu;
  // the larger of the head's backward and a block's (by then the logits and their gradient are freed)
  Ledger logits;
  logits.add(1, N * V, s);
  const uint64_t block_beyond_logits = block_backward.gpu > logits.gpu ? block_backward.gpu - logits.gpu : 0;
  g.temporaries = std::max(head_backward.gpu, block_beyond_logits);
  g.overhead = kCudaContextBytes;
  const uint64_t backward_peak = g.activations + g.temporaries + (o.grad_accum > 1 ? g.gradients : 0);
  const uint64_t update_peak = g.gradients + clip.gpu;
  g.total = g.parameters + g.optimizer_state + std::max(backward_peak, update_peak) + g.overhead;
  return e;
}

uint64_t process_rss_bytes() { return proc_kb_field("/proc/self/status", "VmRSS"); }
uint64_t process_peak_rss_bytes() { return proc_kb_field("/proc/self/status", "VmHWM"); }

std::optional<MemoryCapacity> memory_capacity(Device device) {
  if (device.type == DeviceType::CUDA) {
    const size_t total = kernels::device_memory(device).total_bytes;
    if (total == 0) return std::nullopt;
    return MemoryCapacity{total, fmt::format("{} total memory {}", device, format_bytes(total))};
  }
  const uint64_t available = proc_kb_field("/proc/meminfo", "MemAvailable");
  const uint64_t held = process_rss_bytes();
  if (available > 0)
    return MemoryCapacity{available + held, fmt::format("MemAvailable {} + {} this process holds already",
                                                        format_bytes(available), format_bytes(held))};
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::nullopt;
  const uint64_t physical = uint64_t(pages) * uint64_t(page);
  return MemoryCapacity{physical, fmt::format("physical memory {} (no MemAvailable in /proc/meminfo)",
                                              format_bytes(physical))};
}

std::string format_bytes(uint64_t bytes) {
  static constexpr std::pair<double, const char*> kUnits[] = {{1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "kB"}};
  for (const auto& [scale, unit] : kUnits) {
    if (double(bytes) < scale) continue;
    const double v = double(bytes) / scale;  // 3 significant digits
    return v >= 100 ? fmt::format("{:.0f} {}", v, unit)
                    : v >= 10 ? fmt::format("{:.1f} {}", v, unit) : fmt::format("{:.2f} {}", v, unit);
  }
  return fmt::format("{} B", bytes);
}

std::string format_memory_table(const MemoryEstimate& e, Device run_device,
                                const std::optional<MemoryCapacity>& capacity) {
  const bool on_gpu = run_device.type == DeviceType::CUDA;
  std::string out = fmt::format(
      "memory estimate: batch {} × {} {} = {} tokens per micro-batch, grad_accum {}, {}\n", e.batch_size,
      e.rows_shorter_than_context ? "the longest example" : "context", e.context_length, e.tokens_per_micro_batch,
      e.grad_accum, e.dtype);
  out += fmt::format("  {:<58} {:>10} {:>10}\n", "", on_gpu ? "cpu" : "cpu (run)", on_gpu ? "cuda (run)" : "cuda");
  auto row = [&](const std::string& what, uint64_t cpu, uint64_t gpu) {
    out += fmt::format("  {:<58} {:>10} {:>10}\n", what, format_bytes(cpu), format_bytes(gpu));
  };
  row(fmt::format("parameters ({:.2f} M)", double(e.parameter_count) / 1e6), e.cpu.parameters, e.gpu.parameters);
  row("gradients", e.cpu.gradients, e.gpu.gradients);
  row("AdamW state (m, v)", e.cpu.optimizer_state, e.gpu.optimizer_state);
  row(fmt::format("activations saved for backward ({} × {} + {})", e.n_layers, format_bytes(e.activations_per_block),
                  format_bytes(e.activations_after_blocks)),
      e.cpu.activations, e.gpu.activations);
  row("largest temporaries (backward scratch, clipping)", e.cpu.temporaries, e.gpu.temporaries);
  row("fixed (cpu: process now + BLAS buffers; cuda: context)", e.cpu.overhead, e.gpu.overhead);
  row("total at the peak", e.cpu.total, e.gpu.total);
  out += "  (activations: blocks × one block + what follows the blocks, the logits among it)\n"
         "  (cuda: the gradients live apart from the activations; the total counts the larger, or both with "
         "grad_accum > 1)\n";
  if (capacity)
    out += fmt::format("  this run needs about {} on {}, which has {} ({})\n",
                       format_bytes(on_gpu ? e.gpu.total : e.cpu.total), run_device, format_bytes(capacity->bytes),
                       capacity->source);
  return out;
}

void check_memory_fits(const MemoryEstimate& e, Device run_device, const std::optional<MemoryCapacity>& capacity,
                       bool force) {
  if (!capacity || force) return;
  const uint64_t need = run_device.type == DeviceType::CUDA ? e.gpu.total : e.cpu.total;
  TG_CHECK(need <= capacity->bytes,
           "the estimated peak memory of this run, {}, exceeds the {} that {} has ({}): a smaller --batch-size "
           "(with --grad-accum to keep the tokens per step), --context or model would fit; --force starts it anyway",
           format_bytes(need), format_bytes(capacity->bytes), run_device, capacity->source);
}

}  // namespace tapegrad::lm
