// throughput.h — this machine's matrix-multiply rate, the ceiling the training progress line
// compares its achieved GFLOP/s against (a CPU "MFU": model FLOPs / sgemm FLOPs).
#pragma once

namespace tapegrad::lm {

// Median GFLOP/s of an n×n×n float32 matmul (tapegrad's matmul: one BLAS sgemm) over `reps` runs
// after one warm-up, at the current thread count. n = 512: 0.27 GFLOP a run, a few ms here (it runs at
// every start of `tapegrad train`); its rate is within ~10 % of the rate of larger sizes.
double measure_matmul_gflops(int n = 512, int reps = 3);

}  // namespace tapegrad::lm
