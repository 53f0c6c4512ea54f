// lr_schedule.h — the cosine learning-rate schedule with linear warmup (CS336 assignment 1,
// get_lr_cosine_schedule). With T_w = warmup_iters and T_c = cosine_cycle_iters:
//   t < T_w          : lr = t/T_w · lr_max                                     (linear warmup)
//   T_w ≤ t ≤ T_c    : lr = lr_min + ½(1 + cos(π(t − T_w)/(T_c − T_w)))·(lr_max − lr_min)
//   t > T_c          : lr = lr_min                                             (post-annealing)
// Use: opt.set_lr(cosine_lr(it, 3e-4, 3e-5, 100, 5000)) before opt.step().
#pragma once
#include <cstdint>

namespace tapegrad::optim {

// Requires 0 ≤ warmup_iters ≤ cosine_cycle_iters and t ≥ 0 (tapegrad::Error otherwise). When
// T_w = T_c the cosine part is the single point t = T_w, where lr = lr_max.
double cosine_lr(int64_t t, double lr_max, double lr_min, int64_t warmup_iters, int64_t cosine_cycle_iters);

}  // namespace tapegrad::optim
