// batch.h — language-model batches from a token stream: inputs [batch, context] and targets =
// inputs shifted by one, as int64 tensors on the requested device.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <utility>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "data/token_file.h"
#include "kernels/error.h"

namespace tapegrad::data {

// Any token stream: a TokenFile or an in-memory span. It does not own the tokens: the file or the
// span's memory must outlive it. Cheap to copy.
class TokenSource {
 public:
  TokenSource(const TokenFile& file);         // NOLINT: implicit on purpose
  TokenSource(std::span<const uint32_t> tokens);  // NOLINT
  uint64_t size() const { return size_; }
  uint32_t operator[](uint64_t i) const { return get_(i); }

 private:
  uint64_t size_;
  std::function<uint32_t(uint64_t)> get_;
};

struct Batch {
  Tensor inputs;   // int64 [batch, context]
  Tensor targets;  // int64 [batch, context], targets[b][t] = token at inputs' start + t + 1
};

// `batch` random windows; each start is uniform over every valid offset 0..size-context-1
// (Generator::below). Throws when the data has fewer than context + 1 tokens, batch or context
// is not positive, or `device` is not available.
Batch get_batch(const TokenSource& data, int64_t batch, int64_t context, Generator& generator,
                Device device = kCPU);

// Windows from fixed starts (used by the sequential mode and by tests).
Batch batch_from_starts(const TokenSource& data, std::span<const uint64_t> starts, int64_t context,
                        Device device = kCPU);

// Deterministic pass over the data once: non-overlapping windows starting at 0, context,
// 2·context, … (every start with start + context + 1 <= size), grouped into batches of `batch`
// rows; the last batch may have fewer rows.
class SequentialBatches {
 public:
  SequentialBatches(const TokenSource& data, int64_t batch, int64_t context, Device device = kCPU);
  uint64_t num_windows() const { return num_windows_; }
  uint64_t num_batches() const { return (num_windows_ + uint64_t(batch_) - 1) / uint64_t(batch_); }
  // Batch `i` (0 <= i < num_batches()).
  Batch operator[](uint64_t i) const;

 private:
  TokenSource data_;
  int64_t batch_, context_;
  Device device_;
  uint64_t num_windows_;
};

}  // namespace tapegrad::data
