// thread_count.h — ThreadCount: sets the CPU thread count for a scope and restores it on exit, even when
// a check fails (tests that compare 1 thread with several).
#pragma once
#include "autograd/ops.h"

namespace tapegrad::testing {

struct ThreadCount {
  int prev = num_threads();
  explicit ThreadCount(int n) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(prev); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;
};

}  // namespace tapegrad::testing
