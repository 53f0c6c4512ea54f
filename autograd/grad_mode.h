// grad_mode.h — whether ops record on the tape (per thread). NoGradGuard turns recording off
// for a scope (inference, optimizer updates, the backward pass itself).
#pragma once

namespace tapegrad {

class GradMode {
 public:
  static bool enabled() { return enabled_; }
  static void set_enabled(bool on) { enabled_ = on; }

 private:
  static inline thread_local bool enabled_ = true;
};

class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace tapegrad
