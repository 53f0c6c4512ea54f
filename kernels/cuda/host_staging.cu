// host_staging.cu — host→device copies that never wait for the GPU: the source is copied into
// page-locked (pinned) staging memory and the DMA is queued on the backend's stream.
//
// Why: cudaMemcpyAsync from ordinary (pageable) memory may block the host until the stream's earlier
// work is done, so each training step's batch copy would stall the host behind the previous step and
// leave the GPU idle while the next step's first kernels are launched. From pinned memory the copy is
// truly asynchronous. The batch itself is assembled in ordinary memory (data::get_batch) and copied
// into a staging block here (one memcpy, 131 KB for a 16 × 1025 int64 batch): the caller may free its
// buffer at once.
//
// Blocks: pinned allocations of power-of-two sizes (≥ 64 KiB), each with an event recorded after the
// copy that used it; a block is free again once its event has completed. At most kMaxPinnedBytes
// are kept; when none is free and the cap is reached, the host waits for the oldest block (rare:
// only copies that outrun the GPU for many steps). Copies larger than kMaxStagedCopy (loading a
// model's weights) go straight from pageable memory.
//
// The emulated build (HIP-CPU has no event query) copies synchronously: memory.cu does not call this.
#include <cstring>
#include <mutex>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/runtime.h"

#if !defined(TAPEGRAD_CUDA_EMULATED)
namespace tapegrad::kernels::cuda {
namespace {

constexpr size_t kMinBlock = size_t(64) << 10;
constexpr size_t kMaxStagedCopy = size_t(32) << 20;
constexpr size_t kMaxPinnedBytes = size_t(256) << 20;

// True when the work before `event` is done. cudaErrorNotReady is an answer, not an error: it is
// cleared from the runtime's last-error slot so that the next launch check does not see it.
bool completed(cudaEvent_t event) {
  const cudaError_t e = cudaEventQuery(event);
  if (e == cudaSuccess) return true;
  if (e != cudaErrorNotReady) check(e, "staging: cudaEventQuery");
  if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
  return false;
}

class PinnedStaging {
 public:
  PinnedStaging() = default;
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  // Process lifetime (see the allocator): freeing pinned memory after the CUDA runtime has shut down fails.

  void copy(void* dst, const void* src, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    Block& b = free_block(n);
    std::memcpy(b.ptr, src, n);
    check(cudaMemcpyAsync(dst, b.ptr, n, cudaMemcpyHostToDevice, stream()), "copy host to device (staged)");
    check(cudaEventRecord(b.event, stream()), "staging: cudaEventRecord");
    b.used = ++clock_;
  }

  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    release_locked_blocks();
  }

 private:
  struct Block {
    void* ptr;
    size_t size;
    cudaEvent_t event;
    uint64_t used;  // clock_ at its last copy (0: never used)
  };

  // The smallest free block of ≥ n bytes; else a new one; else (cap reached) the least recently
  // used block of ≥ n bytes once its copy has finished.
  Block& free_block(size_t n) {
    Block* best = nullptr;
    for (Block& b : blocks_)
      if (b.size >= n && (best == nullptr || b.size < best->size) && completed(b.event)) best = &b;
    if (best != nullptr) return *best;
    size_t size = kMinBlock;
    while (size < n) size *= 2;
    if (total_ + size <= kMaxPinnedBytes) {
      Block b{nullptr, size, nullptr, 0};
      check(cudaHostAlloc(&b.ptr, size, cudaHostAllocDefault), "staging: cudaHostAlloc");
      check(cudaEventCreateWithFlags(&b.event, cudaEventDisableTiming), "staging: cudaEventCreate");
      total_ += size;
      blocks_.push_back(b);
      return blocks_.back();
    }
    Block* oldest = nullptr;
    for (Block& b : blocks_)
      if (b.size >= n && (oldest == nullptr || b.used < oldest->used)) oldest = &b;
    if (oldest == nullptr) {  // only smaller blocks: drop them all (after their copies) and start again
      release_locked_blocks();
      return free_block(n);
    }
    check(cudaEventSynchronize(oldest->event), "staging: cudaEventSynchronize");
    return *oldest;
  }

  void release_locked_blocks() {
    for (Block& b : blocks_) {
      check(cudaEventSynchronize(b.event), "staging: cudaEventSynchronize");
      check(cudaEventDestroy(b.event), "staging: cudaEventDestroy");
      check(cudaFreeHost(b.ptr), "staging: cudaFreeHost");
    }
    blocks_.clear();
    total_ = 0;
  }

  std::mutex mu_;
  std::vector<Block> blocks_;
  size_t total_ = 0;
  uint64_t clock_ = 0;
};

PinnedStaging& staging() {
  static PinnedStaging* s = new PinnedStaging();  // never destroyed: see above
  return *s;
}

}  // namespace

bool copy_from_host_staged(void* dst, const void* src, size_t nbytes) {
  if (nbytes > kMaxStagedCopy) return false;
  staging().copy(dst, src, nbytes);
  return true;
}

void release_host_staging() { staging().release(); }

}  // namespace tapegrad::kernels::cuda
#endif  // !TAPEGRAD_CUDA_EMULATED
