// allocator.cpp — CPU memory: small blocks from malloc, large blocks (≥ 1 MiB) cached for reuse.
//
// Why cache: glibc returns blocks above 32 MiB to the kernel on free, so every new 64 MB tensor
// pays ~16k page faults (more time than the kernel that fills it). Training reuses the same
// sizes every step, so large blocks go to a free list keyed by their (64 KiB-rounded) size and
// are handed out again, warm. The cache is bounded (TAPEGRAD_CPU_CACHE_MB, default 4096);
// cpu_empty_cache() releases it. Large blocks are 2 MiB-aligned and advised as huge pages.
#include <sys/mman.h>

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
constexpr size_t kHugeAlign = size_t{2} << 20;

class BlockCache {
 public:
  BlockCache() {
    const char* env = std::getenv("TAPEGRAD_CPU_CACHE_MB");
    limit_ = (env ? std::strtoull(env, nullptr, 10) : 4096ull) << 20;
  }
  ~BlockCache() { release_all(); }
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

size_t round_large(size_t n) { return (n + kLargeRound - 1) / kLargeRound * kLargeRound; }

}  // namespace

void* CpuBackend::allocate(size_t nbytes) {
  if (nbytes < kLarge) {
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64 + (nbytes == 0 ? 64 : 0));
    if (!p) throw std::bad_alloc();
    return p;
  }
  const size_t size = round_large(nbytes);
  if (void* p = cache().take(size)) return p;
  void* p = std::aligned_alloc(kHugeAlign, (size + kHugeAlign - 1) / kHugeAlign * kHugeAlign);
  if (!p) throw std::bad_alloc();
  madvise(p, size, MADV_HUGEPAGE);
  return p;
}

void CpuBackend::deallocate(void* p, size_t nbytes) {
  if (!p) return;
  if (nbytes >= kLarge && cache().give(p, round_large(nbytes))) return;
  std::free(p);
}

void CpuBackend::copy_from_host(void* dst, const void* src, size_t nbytes) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}
void CpuBackend::copy_to_host(void* dst, const void* src, size_t nbytes) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}

size_t cpu_cached_bytes() { return cache().cached(); }
void cpu_empty_cache() { cache().release_all(); }

CpuBackend& cpu_backend() {
  static CpuBackend b;
  return b;
}

}  // namespace tapegrad::kernels::cpu
