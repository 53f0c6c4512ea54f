// memory_estimate.h — how much memory a training run will need, before it starts (`train --dry-run`,
// and the table every `train` prints): arithmetic on the model config and the TrainOptions, nothing allocated.
//
// Counted from what the ops really keep (N = batch_size·T tokens of one micro-batch, s = bytes per element):
//   parameters P, gradients G (the same shapes), AdamW's m and v (2·P; created at the first step);
//   activations saved for backward, per block (nn/block.cpp, the fused ops of autograd/ops):
//     [N, C] ×6   the block input (RMSNorm), ln1's output (q/k/v matmuls), q after RoPE and the attention
//                 output (causal_attention; the output is also output_proj's input), h = x + attn (RMSNorm),
//                 ln2's output (w1/w3 matmuls)
//     [N, Hkv·D] ×2  k after RoPE, v        [N, F] ×3  w1 x, w3 x (swiglu), swiglu's output (w2)
//     [N] ×2, [N·H]  the RMSNorm rstd rows, attention's per-row log-sum-exp
//   and after the blocks: the last block's output and ln_final's output [N, C], the logits [N, V]
//   (cross_entropy saves them, no softmax), its lse [N] (float64), the ids and targets [N] (int64);
//   temporaries: not the logits' gradient (cross_entropy writes it over the logits it saved), but the head's
//   backward outputs [N, C] and [V, C] made beside it (on the CPU those sizes are cached already), backward's
//   working set in a block (two [N, F] and two [N, C] blocks: the gradients flowing through SwiGLU
//   before the activations they replace are freed), and clip_grad_norm's g⊙g (one of each weight shape).
// Every tensor is rounded as the device's allocator rounds it (kernels/cpu/allocator.cpp: large CPU blocks are
// 2 MiB-aligned huge pages; kernels/cuda/memory.cu: 512 B below 1 MiB, 2 MiB above).
// The totals differ by device because the allocators do: the CPU's caches blocks by size, so the gradients that
// zero_grad frees stay resident while the next forward makes activations of other sizes (total = everything,
// plus the process baseline); the GPU's peak_allocated_bytes counts live tensors only, and the gradients do not
// live together with the activations (zero_grad frees them before forward, backward frees each activation as it
// makes the gradients): total = P + m + v + max(activations + max(the head's backward, a block's backward − the
// logits, freed by then), G + g⊙g) (+ G with grad_accum > 1,
// whose later micro-batches run with the gradients of the earlier ones), plus the CUDA context.
//   lm::MemoryEstimate e = lm::estimate_training_memory(config, options, lm::process_rss_bytes());
//   fmt::print("{}", lm::format_memory_table(e, options.device));
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "lm/trainer.h"
#include "nn/transformer_lm.h"

namespace tapegrad::lm {

// The rows of the estimate on one device, in bytes as its allocator holds them.
struct MemoryColumn {
  uint64_t parameters = 0, gradients = 0, optimizer_state = 0, activations = 0, temporaries = 0, overhead = 0;
  uint64_t total = 0;  // the peak (see the header comment: not always the sum of the rows)
};

struct MemoryEstimate {
  int64_t parameter_count = 0;
  int64_t tokens_per_micro_batch = 0;        // N = batch_size · context_length
  uint64_t activations_per_block = 0;        // bytes (CPU rounding), for the table's detail line
  uint64_t activations_after_blocks = 0;     // ln_final, logits, lse, ids, targets
  MemoryColumn cpu, gpu;
  int64_t batch_size = 0, context_length = 0, grad_accum = 1, n_layers = 0;  // context_length: the rows' length
  bool rows_shorter_than_context = false;  // --sft: rows as long as the longest example
  DType dtype = kFloat32;
};

// The estimate for training `config` with `options` (batch_size, grad_accum; the config's dtype). The config
// may leave n_kv_heads and d_ff at 0 (their defaults are applied). `host_baseline_bytes` is the CPU column's
// fixed overhead: the process as it is before the model exists (runtime, libraries, the tokenized data);
// process_rss_bytes() measures it. The CPU column adds OpenBLAS's per-thread work buffers for `threads`.
// `sequence_length` (0: the context length) is the longest row a batch holds: --sft pads each batch to its longest
// example, so the run's peak is that of its longest example, not of the context.
MemoryEstimate estimate_training_memory(const nn::TransformerLMConfig& config, const TrainOptions& options,
                                        uint64_t host_baseline_bytes, int threads = 1, int64_t sequence_length = 0);

// This process's resident memory now (VmRSS) and its peak so far (VmHWM), from /proc/self/status (0 when
// that cannot be read).
uint64_t process_rss_bytes();
uint64_t process_peak_rss_bytes();

// The memory a run may use on `device`, and where the number comes from: on the CPU MemAvailable of
// /proc/meminfo plus what this process already holds (its RSS: the baseline the estimate counts), else the
// physical RAM (sysconf); on a GPU the device's total memory (kernels/device_memory.h). nullopt when unknown.
struct MemoryCapacity {
  uint64_t bytes = 0;
  std::string source;  // "MemAvailable 20.1 GB + 169 MB this process holds already", "cuda:0 total memory 85.0 GB"
};
std::optional<MemoryCapacity> memory_capacity(Device device);

// "1.23 GB", "45.6 MB", "789 kB" (decimal units, 3 significant digits).
std::string format_bytes(uint64_t bytes);

// The table `train` prints: one column per device, the one this run uses marked, and the total against the
// capacity when given.
std::string format_memory_table(const MemoryEstimate& e, Device run_device,
                                const std::optional<MemoryCapacity>& capacity = std::nullopt);

// Throws tapegrad::Error naming both numbers when the run device's total exceeds the capacity (unless `force`).
void check_memory_fits(const MemoryEstimate& e, Device run_device, const std::optional<MemoryCapacity>& capacity,
                       bool force);

}  // namespace tapegrad::lm
