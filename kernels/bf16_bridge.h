// bf16_bridge.h — bfloat16 on every backend function, computed in float32.
//
// Bf16Bridge wraps a backend (the CPU one, a CUDA one) and is what kernels::backend() returns. A call
// whose views are all float32/float64/int/bool goes straight to the wrapped backend. A call with a
// bfloat16 view is run as:
//   1. every bfloat16 input is widened into a float32 scratch copy (exact: bfloat16 ⊂ float32);
//   2. every bfloat16 output gets a float32 scratch (an output that is also read — matmul's accumulate,
//      index_add, scatter_add, AdamW's four tensors — is widened first);
//   3. the wrapped backend's float32 kernel runs on the scratch views;
//   4. every bfloat16 output is rounded back (to nearest, ties to even: kernels/bfloat16.h).
// So a bfloat16 op is "the float32 op, with inputs and outputs rounded to bfloat16" — the definition
// tests/test_bf16_ops.cpp checks every op against — and matmul is bf16 × bf16 with float32
// accumulation. fill and copy store bfloat16 themselves (copy is how steps 1 and 4 convert).
//
// A broadcast input (stride 0) is widened without materializing the broadcast: its scratch holds one
// element per distinct position and keeps stride 0. A backend with a kernel of its own for a bfloat16 call
// takes it first (Backend::matmul_bf16_native: cuBLAS's bf16 tensor-core GEMM on a GPU).
#pragma once
#include <memory>

#include "kernels/backend.h"

namespace tapegrad::kernels {

// The bridge around `inner` (one per backend, alive for the process).
Backend& bf16_bridge(Backend& inner);

}  // namespace tapegrad::kernels
