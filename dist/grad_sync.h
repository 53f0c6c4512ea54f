// grad_sync.h — averages the parameters' gradients over the ranks of a Communicator, the data-parallel
// step between backward and the optimizer (docs/distributed.md):
//
//   dist::GradientSync sync(comm, model.parameters());
//   sync.begin();             // before the backward whose gradients are to be averaged
//   loss.backward();          // buckets are all-reduced as soon as backward has finished them
//   sync.finish();            // waits; every p.grad() is now the mean over the ranks, on every rank
//
// Buckets: the parameters in reverse order (backward produces the last layer's gradients first), cut
// into buckets of about bucket_bytes of one dtype and device. With overlap on, a GradReadyHook
// (autograd/grad_hooks.h) copies each finished gradient into its bucket's flat buffer and starts the
// bucket's all_reduce_async as soon as the bucket is full, while backward goes on with earlier layers;
// finish() starts the buckets still open (parameters the backward did not reach count as zero
// gradients and get one) and waits for all. With overlap off, finish() does all of it after backward.
// Either way the result is the same bits: each element is reduced once, by the same collective.
//
// With gradient accumulation, call begin() before the last micro-batch's backward only: the earlier
// ones just accumulate into .grad locally (PyTorch DDP's no_sync).
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "autograd/grad_hooks.h"
#include "autograd/tensor.h"
#include "dist/communicator.h"

namespace tapegrad::dist {

struct GradientSyncOptions {
  size_t bucket_bytes = size_t(4) << 20;  // about 4 MiB per all-reduce
  bool overlap = true;                    // start buckets during backward
};

class GradientSync {
 public:
  GradientSync(std::shared_ptr<Communicator> comm, std::vector<Tensor> params, GradientSyncOptions options = {});
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  void begin();
  void finish();

  size_t num_buckets() const { return buckets_.size(); }
  // How many buckets the last finish() found already started during backward (overlap at work).
  size_t buckets_started_during_backward() const { return started_early_; }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_, in the bucket's order
    std::vector<int64_t> offsets;
    Tensor flat;                 // the bucket's gradients side by side
    size_t ready = 0;
    std::unique_ptr<Work> work;
  };
  void on_ready(size_t param);
  void copy_in(size_t param);
  void start(Bucket& b);

  std::shared_ptr<Communicator> comm_;
  std::vector<Tensor> params_;
  GradientSyncOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_, slot_of_;  // per parameter
  std::vector<bool> copied_;
  std::unique_ptr<GradReadyHook> hook_;
  bool armed_ = false;
  size_t started_early_ = 0;
};

}  // namespace tapegrad::dist
