// pool.h — a thread-local free-list allocator for the small objects every op creates
// (TensorImpl, Storage, tape entries), used through std::allocate_shared.
//
// Why: recording one op allocates three or four such objects and frees them after backward. A
// 10,000-op chain keeps tens of thousands alive; past glibc's 7-entry tcache each malloc/free
// then takes the binned slow path (~100 instructions). Here a freed block goes onto an intrusive
// list for its 16-byte size class and the next allocation of that size pops it (a few
// instructions). Each class keeps at most 64 MiB; a thread's lists go back to malloc when it ends.
#pragma once
#include <cstddef>
#include <memory>

namespace tapegrad::detail {

void* pool_allocate(size_t bytes);
void pool_deallocate(void* p, size_t bytes);

template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) {}  // NOLINT: rebinding, as the standard requires
  T* allocate(size_t n) { return static_cast<T*>(pool_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { pool_deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const { return true; }
};

template <class T, class... Args>
std::shared_ptr<T> make_pooled(Args&&... args) {
  static_assert(alignof(T) <= 16, "pooled objects must not need more than 16-byte alignment");
  return std::allocate_shared<T>(PoolAllocator<T>{}, std::forward<Args>(args)...);
}

}  // namespace tapegrad::detail
