// pool.cpp — size-class free lists behind make_pooled (see pool.h).
#include "autograd/pool.h"

#include <array>
#include <cstdlib>
#include <new>

namespace tapegrad::detail {
namespace {

constexpr size_t kGranule = 16, kMaxPooled = 1024, kClasses = kMaxPooled / kGranule;
constexpr size_t kMaxBytesPerClass = size_t{64} << 20;

struct FreeBlock {
  FreeBlock* next;
};

class Pool {
 public:
  ~Pool() {
    for (FreeBlock* head : heads_)
      while (head) {
        FreeBlock* next = head->next;
        std::free(head);
        head = next;
      }
    destroyed = true;
  }
  // A thread's pool is destroyed before the program's statics at exit; objects freed after that
  // (a static Tensor) go straight to free() instead of into the dead pool.
  static inline thread_local bool destroyed = false;
  void* take(size_t cls) {
    FreeBlock* b = heads_[cls];
    if (!b) return nullptr;
    heads_[cls] = b->next;
    bytes_[cls] -= (cls + 1) * kGranule;
    return b;
  }
  bool give(void* p, size_t cls) {
    if (bytes_[cls] + (cls + 1) * kGranule > kMaxBytesPerClass) return false;
    heads_[cls] = new (p) FreeBlock{heads_[cls]};
    bytes_[cls] += (cls + 1) * kGranule;
    return true;
  }

 private:
  std::array<FreeBlock*, kClasses> heads_{};
  std::array<size_t, kClasses> bytes_{};
};

Pool& pool() {
  thread_local Pool p;
  return p;
}

}  // namespace

void* pool_allocate(size_t bytes) {
  if (bytes == 0 || bytes > kMaxPooled) {
    void* p = std::malloc(bytes ? bytes : 1);
    if (!p) throw std::bad_alloc();
    return p;
  }
  const size_t cls = (bytes - 1) / kGranule;
  if (!Pool::destroyed)
    if (void* p = pool().take(cls)) return p;
  void* p = std::malloc((cls + 1) * kGranule);
  if (!p) throw std::bad_alloc();
  return p;
}

void pool_deallocate(void* p, size_t bytes) {
  if (!p) return;
  if (bytes == 0 || bytes > kMaxPooled || Pool::destroyed || !pool().give(p, (bytes - 1) / kGranule)) std::free(p);
}

}  // namespace tapegrad::detail
