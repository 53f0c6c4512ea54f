// allocator.cpp — CPU memory: small blocks from malloc, large blocks (≥ 1 MiB) cached for reuse.
//
// Small blocks (≤ 4 KiB): per-thread free lists in 64-byte size classes, bounded to 32 MiB per
// thread, over malloc. A chain of tiny ops keeps thousands of buffers alive, and past glibc's
// 7-entry tcache every malloc/free takes its slow binned path — that alone cost more than the
// 64-element kernels of the per-op overhead benchmark.
// Medium blocks (4 KiB – 1 MiB) go to the same cache keyed by their 4 KiB-rounded size.
// Why cache large ones: glibc returns blocks above 32 MiB to the kernel on free, so every new 64 MB tensor
// pays ~16k page faults (more time than the kernel that fills it). Training reuses the same
// sizes every step, so large blocks go to a free list keyed by their (64 KiB-rounded) size and
// are handed out again, warm. The cache is bounded (TAPEGRAD_CPU_CACHE_MB, default 4096);
// cpu_empty_cache() releases it. Large blocks are 2 MiB-aligned and advised as huge pages.
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace tapegrad::kernels::cpu {
namespace {

constexpr size_t kLarge = size_t{1} << 20;
constexpr size_t kLargeRound = size_t{64} << 10;
constexpr size_t kMediumRound = size_t{4} << 10;
constexpr size_t kHugeAlign = size_t{2} << 20;

class BlockCache {
 public:
  BlockCache() {
    const char* env = std::getenv("TAPEGRAD_CPU_CACHE_MB");
    limit_ = (env ? std::strtoull(env, nullptr, 10) : 4096ull) << 20;
  }
  ~BlockCache() {
    release_all();
    destroyed = true;
  }
  // Set once the cache is gone (static destruction at exit): blocks freed later (a static Tensor
  // destroyed after it) go straight back to the system.
  static inline bool destroyed = false;
  void* take(size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= size;
    return p;
  }
  bool give(void* p, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + size > limit_) return false;
    free_[size].push_back(p);
    cached_ += size;
    return true;
  }
  size_t cached() {
    std::lock_guard<std::mutex> lock(mu_);
    return cached_;
  }
  void release_all() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    cached_ = 0;
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0, limit_ = 0;
};

BlockCache& cache() {
  static BlockCache c;
  return c;
}

constexpr size_t kSmall = 4096, kSmallClass = 64, kSmallClasses = kSmall / kSmallClass;
constexpr size_t kSmallCacheBytes = size_t{32} << 20;

class SmallCache {
 public:
  ~SmallCache() {
    for (auto& list : free_)
      for (void* p : list) std::free(p);
    destroyed = true;
  }
  // A thread's cache is destroyed before the program's statics at exit: a static Tensor freed
  // after that must not touch it (it would be a use after free), so its block goes to free().
  static inline thread_local bool destroyed = false;
  static size_t class_of(size_t n) { return n == 0 ? 0 : (n - 1) / kSmallClass; }
  void* take(size_t cls) {
    auto& list = free_[cls];
    if (list.empty()) return nullptr;
    void* p = list.back();
    list.pop_back();
    bytes_ -= (cls + 1) * kSmallClass;
    return p;
  }
  bool give(void* p, size_t cls) {
    if (bytes_ + (cls + 1) * kSmallClass > kSmallCacheBytes) return false;
    free_[cls].push_back(p);
    bytes_ += (cls + 1) * kSmallClass;
    return true;
  }

 private:
  std::array<std::vector<void*>, kSmallClasses> free_;
  size_t bytes_ = 0;
};

SmallCache& small_cache() {
  thread_local SmallCache c;
  return c;
}

// Blocks requested from the system (malloc / aligned_alloc), counted for tests: a step that reuses
// its buffers (a decoding step after the first) adds none. Only the slow path counts.
std::atomic<uint64_t> system_allocations{0};

size_t round_large(size_t n) { return (n + kLargeRound - 1) / kLargeRound * kLargeRound; }
size_t round_medium(size_t n) { return (n + kMediumRound - 1) / kMediumRound * kMediumRound; }

}  // namespace

void* CpuBackend::allocate(size_t nbytes) {
  if (nbytes <= kSmall) {
    const size_t cls = SmallCache::class_of(nbytes);
    if (!SmallCache::destroyed)
      if (void* p = small_cache().take(cls)) return p;
    void* p = std::malloc((cls + 1) * kSmallClass);
    if (!p) throw std::bad_alloc();
    system_allocations.fetch_add(1, std::memory_order_relaxed);
    return p;
  }
  if (nbytes < kLarge) {
    // Medium blocks: cached too, keyed by their 4 KiB-rounded size (glibc trims its heap top and
    // unmaps freed mmap chunks, so without the cache a training step re-faults these pages every
    // time: ~1,500 page faults per step of the micro benchmark). Plain malloc (16-byte aligned):
    // aligned_alloc would take glibc's slower memalign path.
    const size_t size = round_medium(nbytes);
    if (!BlockCache::destroyed)
      if (void* p = cache().take(size)) return p;
    void* p = std::malloc(size);
    if (!p) throw std::bad_alloc();
    system_allocations.fetch_add(1, std::memory_order_relaxed);
    return p;
  }
  const size_t size = round_large(nbytes);
  if (!BlockCache::destroyed)
    if (void* p = cache().take(size)) return p;
  void* p = std::aligned_alloc(kHugeAlign, (size + kHugeAlign - 1) / kHugeAlign * kHugeAlign);
  if (!p) throw std::bad_alloc();
  system_allocations.fetch_add(1, std::memory_order_relaxed);
  madvise(p, size, MADV_HUGEPAGE);
  return p;
}

void CpuBackend::deallocate(void* p, size_t nbytes) {
  if (!p) return;
  if (nbytes <= kSmall && !SmallCache::destroyed && small_cache().give(p, SmallCache::class_of(nbytes))) return;
  if (nbytes >= kLarge && !BlockCache::destroyed && cache().give(p, round_large(nbytes))) return;
  if (nbytes > kSmall && nbytes < kLarge && !BlockCache::destroyed && cache().give(p, round_medium(nbytes))) return;
  std::free(p);
}

void CpuBackend::copy_from_host(void* dst, const void* src, size_t nbytes) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}
void CpuBackend::copy_to_host(void* dst, const void* src, size_t nbytes) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}
void CpuBackend::copy_on_device(void* dst, const void* src, size_t nbytes) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}

uint64_t cpu_system_allocations() { return system_allocations.load(std::memory_order_relaxed); }
size_t cpu_cached_bytes() { return BlockCache::destroyed ? 0 : cache().cached(); }
void cpu_empty_cache() {
  if (!BlockCache::destroyed) cache().release_all();
}

CpuBackend& cpu_backend() {
  static CpuBackend b;
  return b;
}

}  // namespace tapegrad::kernels::cpu
