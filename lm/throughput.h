// throughput.h — this machine's matrix-multiply rate, the ceiling the training progress line
// compares its achieved GFLOP/s against (an "MFU": model FLOPs / matmul FLOPs).
#pragma once

#include "kernels/dtype.h"  // Device

namespace tapegrad::lm {

// Median GFLOP/s of an n×n×n float32 matmul on `device` (on the CPU one BLAS sgemm at the current
// thread count; on a GPU cuBLAS, or its TF32 rate when TF32 is on) over `reps` runs after one warm-up.
// n = 0: 512 on the CPU (0.27 GFLOP a run, a few ms: it runs at every start of `tapegrad train`; within
// ~10 % of the rate of larger sizes), 4096 on a GPU (137 GFLOP, ~3 ms; smaller sizes under-fill it).
// dtype: Float32, or BFloat16 (bf16 operands and output, float32 accumulation: the GPU's bf16 tensor-core
// rate, the ceiling of --precision bf16; on the CPU the bf16 bridge's widened sgemm).
double measure_matmul_gflops(int n = 0, int reps = 3, Device device = Device::cpu(), DType dtype = DType::Float32);

}  // namespace tapegrad::lm
