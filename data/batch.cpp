// batch.cpp — fills int64 CPU tensors from the token stream, then moves them to the device.
#include "data/batch.h"

#include <vector>

#include "kernels/backend.h"

namespace tapegrad::data {

TokenSource::TokenSource(const TokenFile& file) : size_(file.size()), get_([&file](uint64_t i) { return file[i]; }) {}
TokenSource::TokenSource(std::span<const uint32_t> tokens)
    : size_(tokens.size()), get_([tokens](uint64_t i) { return tokens[i]; }) {}

namespace {
void check_device(Device device, const char* who) {
  TG_CHECK(device.index >= 0, "{}: device {} has a negative index", who, device);
  TG_CHECK(device.type != DeviceType::CPU || device.index == 0, "{}: device {}: there is only one CPU device (cpu:0)",
           who, device);
  (void)kernels::backend(device);  // throws for a device this build cannot use
}
}  // namespace

Batch batch_from_starts(const TokenSource& data, std::span<const uint64_t> starts, int64_t context, Device device) {
  check_device(device, "get_batch");
  TG_CHECK(context > 0, "get_batch: context {} must be positive", context);
  const auto rows = int64_t(starts.size());
  Tensor inputs = empty({rows, context}, Options(kInt64));
  Tensor targets = empty({rows, context}, Options(kInt64));
  int64_t* in = inputs.data<int64_t>();
  int64_t* out = targets.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t start = starts[r];
    TG_CHECK(start + uint64_t(context) + 1 <= data.size() && start < data.size(),
             "get_batch: window at {} of {}+1 tokens runs past the end of the data ({} tokens)", start, context,
             data.size());
    for (int64_t t = 0; t < context; ++t) {
      in[r * context + t] = data[start + t];
      out[r * context + t] = data[start + t + 1];
    }
  }
  if (device == kCPU) return {inputs, targets};
  return {inputs.to(device), targets.to(device)};
}

Batch get_batch(const TokenSource& data, int64_t batch, int64_t context, Generator& generator, Device device) {
  check_device(device, "get_batch");
  TG_CHECK(batch > 0 && context > 0, "get_batch: batch {} and context {} must be positive", batch, context);
  TG_CHECK(data.size() >= uint64_t(context) + 1, "get_batch: {} tokens are too few for context {} (need {})",
           data.size(), context, context + 1);
  const uint64_t valid_starts = data.size() - uint64_t(context);
  std::vector<uint64_t> starts(batch);
  for (auto& s : starts) s = generator.below(valid_starts);
  return batch_from_starts(data, starts, context, device);
}

SequentialBatches::SequentialBatches(const TokenSource& data, int64_t batch, int64_t context, Device device)
    : data_(data), batch_(batch), context_(context), device_(device) {
  check_device(device, "SequentialBatches");
  TG_CHECK(batch > 0 && context > 0, "SequentialBatches: batch {} and context {} must be positive", batch, context);
  num_windows_ = data.size() == 0 ? 0 : (data.size() - 1) / uint64_t(context);
  TG_CHECK(num_windows_ > 0, "SequentialBatches: {} tokens are too few for context {} (need {})", data.size(), context,
           context + 1);
}

Batch SequentialBatches::operator[](uint64_t i) const {
  TG_CHECK(i < num_batches(), "SequentialBatches: batch {} is outside 0..{}", i, num_batches() - 1);
  const uint64_t first = i * uint64_t(batch_);
  const uint64_t last = std::min(num_windows_, first + uint64_t(batch_));
  std::vector<uint64_t> starts;
  for (uint64_t w = first; w < last; ++w) starts.push_back(w * uint64_t(context_));
  return batch_from_starts(data_, starts, context_, device_);
}

}  // namespace tapegrad::data
