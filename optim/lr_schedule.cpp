// lr_schedule.cpp — cosine_lr and wsd_lr (formulas in lr_schedule.h, repeated next to the code).
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/error.h"

namespace tapegrad::optim {

double cosine_lr(int64_t t, double lr_max, double lr_min, int64_t warmup_iters, int64_t cosine_cycle_iters) {
  TG_CHECK(t >= 0, "cosine_lr: iteration t must be >= 0, but is {}", t);
  TG_CHECK(warmup_iters >= 0 && warmup_iters <= cosine_cycle_iters,
           "cosine_lr: need 0 <= warmup_iters <= cosine_cycle_iters, but warmup_iters is {} and cosine_cycle_iters {}",
           warmup_iters, cosine_cycle_iters);
  const double tw = static_cast<double>(warmup_iters), tc = static_cast<double>(cosine_cycle_iters);
  const double td = static_cast<double>(t);
  if (t < warmup_iters) return td / tw * lr_max;  // t/T_w · lr_max
  if (t > cosine_cycle_iters) return lr_min;      // after the cycle
  if (cosine_cycle_iters == warmup_iters) return lr_max;
  // lr_min + ½(1 + cos(π(t − T_w)/(T_c − T_w)))·(lr_max − lr_min)
  return lr_min + 0.5 * (1.0 + std::cos(std::numbers::pi * (td - tw) / (tc - tw))) * (lr_max - lr_min);
}

double wsd_lr(int64_t t, double lr_max, double lr_min, int64_t warmup_iters, int64_t total_iters, int64_t decay_iters) {
  TG_CHECK(t >= 0, "wsd_lr: iteration t must be >= 0, but is {}", t);
  TG_CHECK(decay_iters >= 0 && decay_iters <= total_iters,
           "wsd_lr: need 0 <= decay_iters <= total_iters, but decay_iters is {} and total_iters {}", decay_iters,
           total_iters);
  TG_CHECK(warmup_iters >= 0 && warmup_iters <= total_iters - decay_iters,
           "wsd_lr: the warm-up ({} iterations) must end before the decay starts (iteration {})", warmup_iters,
           total_iters - decay_iters);
  const int64_t decay_start = total_iters - decay_iters;
  if (t < warmup_iters) return double(t) / double(warmup_iters) * lr_max;  // t/T_w · lr_max
  if (t < decay_start) return lr_max;                                      // stable
  if (t >= total_iters) return lr_min;
  // lr_max − (lr_max − lr_min)·(t − (T − D))/D
  return lr_max - (lr_max - lr_min) * double(t - decay_start) / double(decay_iters);
}

int64_t wsd_decay_iters(int64_t total_iters, double fraction) {
  TG_CHECK(fraction > 0 && fraction <= 1, "wsd_decay_iters: the fraction must be in (0, 1], but is {}", fraction);
  const auto d = static_cast<int64_t>(std::llround(fraction * double(total_iters)));
  return std::clamp<int64_t>(d, total_iters > 0 ? 1 : 0, total_iters);
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  if (name == "cosine") return ScheduleKind::Cosine;
  if (name == "wsd") return ScheduleKind::Wsd;
  throw Error(fmt::format("--schedule must be cosine or wsd, but is '{}'", name));
}

const char* schedule_kind_name(ScheduleKind kind) { return kind == ScheduleKind::Wsd ? "wsd" : "cosine"; }

}  // namespace tapegrad::optim
