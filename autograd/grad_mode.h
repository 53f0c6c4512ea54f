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

namespace tapegrad {

// Anomaly detection (per thread, off by default; like torch.autograd.detect_anomaly): every op
// that records a tape entry checks its output, and backward checks every gradient an entry
// produces; the first non-finite value (NaN or ±inf) throws a tapegrad::Error naming the entry
// (op name, tape number, input and output shapes). It reads every recorded tensor once more:
// a debugging aid, slower than a normal step.
class AnomalyMode {
 public:
  static bool enabled() { return enabled_; }
  static void set_enabled(bool on) { enabled_ = on; }

 private:
  static inline thread_local bool enabled_ = false;
};

class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool on = true) : prev_(AnomalyMode::enabled()) { AnomalyMode::set_enabled(on); }
  ~DetectAnomalyGuard() { AnomalyMode::set_enabled(prev_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace tapegrad

namespace tapegrad {

// Retain-values mode (per thread, off by default; turned on by RetainValuesGuard, autograd/graph.h):
// every tape entry recorded keeps a detached copy of its output value (and of its constant inputs),
// and backward keeps, for every entry it runs, the gradient it received and the gradient it passed to
// each input — what to_dot(…, {.values, .grads}) and to_html draw. Off, it costs one flag check when an
// entry is recorded and one per backward.
class RetainValuesMode {
 public:
  static bool enabled() { return enabled_; }
  static void set_enabled(bool on) { enabled_ = on; }

 private:
  static inline thread_local bool enabled_ = false;
};

}  // namespace tapegrad
