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
// takes it first, untouched: Backend::native_bf16(f) (the CUDA backend's elementwise, fused and softmax
// kernels) and, per call, Backend::matmul_bf16_native (cuBLAS's bf16 tensor-core GEMM on a GPU).
//
// Counters (bf16_bridge_stats): per function, the calls that were widened, the float32 scratch bytes they
// allocated, and the bfloat16 calls handed to the backend's own kernel — so a test can prove that a
// training step on the GPU widens nothing for the functions the backend claims.
#pragma once
#include <array>
#include <cstdint>
#include <memory>

#include "kernels/backend.h"

namespace tapegrad::kernels {

// The bridge around `inner` (one per backend, alive for the process).
Backend& bf16_bridge(Backend& inner);
// A bridge around `inner` that widens every bfloat16 call, also those `inner` takes natively (and matmul):
// the reference a native kernel must reproduce bit for bit (tests/cuda/test_cuda_bf16.cpp). Not counted in
// bf16_bridge_stats.
Backend& bf16_widening_bridge(Backend& inner);

// "unary", "cross_entropy_backward", "adamw", … (the enumerator in snake_case).
const char* backend_function_name(BackendFunction f);

// What the bridges did with bfloat16 calls since the process started (counters only grow; take two
// snapshots and subtract with since() to measure a stretch of work).
struct Bf16BridgeStats {
  struct Counts {
    uint64_t widened_calls = 0;   // calls run on float32 scratch copies
    uint64_t widened_bytes = 0;   // float32 scratch bytes those calls allocated
    uint64_t native_calls = 0;    // bfloat16 calls passed through to the backend's own kernel
  };
  std::array<Counts, kBackendFunctionCount> by_function{};

  const Counts& operator[](BackendFunction f) const { return by_function[static_cast<size_t>(f)]; }
  Counts total() const;
  Bf16BridgeStats since(const Bf16BridgeStats& earlier) const;  // this − earlier, per function
};
// The counters of the bridge of `device`'s backend (all zero when it has none yet). Thread-safe.
Bf16BridgeStats bf16_bridge_stats(Device device);

}  // namespace tapegrad::kernels
