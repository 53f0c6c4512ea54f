// lr_schedule.h — learning-rate schedules with linear warm-up: the cosine (CS336 assignment 1,
// get_lr_cosine_schedule) and warmup–stable–decay (WSD; Hu et al. 2024 "MiniCPM", the speedruns).
//
// Cosine, with T_w = warmup_iters and T_c = cosine_cycle_iters:
//   t < T_w          : lr = t/T_w · lr_max                                     (linear warmup)
//   T_w ≤ t ≤ T_c    : lr = lr_min + ½(1 + cos(π(t − T_w)/(T_c − T_w)))·(lr_max − lr_min)
//   t > T_c          : lr = lr_min                                             (post-annealing)
// Use: opt.set_lr(cosine_lr(it, 3e-4, 3e-5, 100, 5000)) before opt.step().
//
// WSD, with T_w = warmup_iters, T = total_iters and D = decay_iters (the decay is the last D of T):
//   t < T_w              : lr = t/T_w · lr_max                                 (linear warmup)
//   T_w ≤ t < T − D      : lr = lr_max                                         (stable)
//   T − D ≤ t < T        : lr = lr_max − (lr_max − lr_min)·(t − (T − D))/D     (linear decay)
//   t ≥ T                : lr = lr_min
// Why WSD: the stable phase does not depend on T, so a checkpoint taken in it can be continued to a longer
// run (a new T) with the same history — a cosine's every step depends on where it ends (docs/training.md).
#pragma once
#include <cstdint>
#include <string>

namespace tapegrad::optim {

// Requires 0 ≤ warmup_iters ≤ cosine_cycle_iters and t ≥ 0 (tapegrad::Error otherwise). When
// T_w = T_c the cosine part is the single point t = T_w, where lr = lr_max.
double cosine_lr(int64_t t, double lr_max, double lr_min, int64_t warmup_iters, int64_t cosine_cycle_iters);

// Requires t ≥ 0, 0 ≤ decay_iters ≤ total_iters and 0 ≤ warmup_iters ≤ total_iters − decay_iters.
double wsd_lr(int64_t t, double lr_max, double lr_min, int64_t warmup_iters, int64_t total_iters, int64_t decay_iters);

// D for a decay over `fraction` ∈ (0, 1] of T iterations: round(fraction·T), at least 1 (when T ≥ 1), at most T.
int64_t wsd_decay_iters(int64_t total_iters, double fraction);

enum class ScheduleKind { Cosine, Wsd };
// "cosine" / "wsd"; anything else: tapegrad::Error naming --schedule.
ScheduleKind parse_schedule_kind(const std::string& name);
const char* schedule_kind_name(ScheduleKind kind);

}  // namespace tapegrad::optim
