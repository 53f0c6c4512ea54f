// lr_schedule.cpp — cosine_lr (formula in lr_schedule.h, repeated next to the code).
#include "optim/lr_schedule.h"

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

}  // namespace tapegrad::optim
