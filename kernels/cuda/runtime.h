// runtime.h — the one thin runtime layer every CUDA kernel of tapegrad is written against.
//
// Under nvcc it maps to the CUDA runtime; in the emulated build (TAPEGRAD_CUDA_EMULATED, the .cu
// files compiled as host C++) it maps to HIP-CPU (../shared/third_party/hip-cpu), which runs the
// very same kernel source on host threads: each block is a set of fibers, `__shared__` memory and
// `__syncthreads` work, warps are emulated. That is how the kernels are tested without a GPU.
//
// Rules for kernels (they keep both builds correct):
//   * Warp shuffles only through warp_sum / warp_max / group16_* below (butterfly XOR, width 32). HIP-CPU's
//     warps are 64 wide and its shfl_down/shfl with width 32 are wrong for the upper half, while
//     its shfl_xor is right; a butterfly also leaves the result in every lane.
//   * HIP-CPU implements a shuffle as a barrier of the whole block: every thread of the block must
//     call the same shuffles (no shuffle inside `if (warp == 0)`), exactly as for __syncthreads.
//   * Blocks have a multiple of 32 threads, at most 1024.
//   * Dynamic shared memory: TG_DYNAMIC_SHARED(T, name) at the top of the kernel.
//   * Launch with launch(kernel, grid, block, shared_bytes, args...) on the backend's stream.
// launch() is the one place kernels are queued: during a graph capture (graph_capture.h) the emulated
// build records each launch with its arguments by value instead of running it; under nvcc the stream
// capture records it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <tuple>

#if defined(TAPEGRAD_CUDA_EMULATED)
#include <hip/hip_runtime.h>
// Under GCC, HIP-CPU declares kernels __attribute__((flatten, simd)); the simd clones are never
// used (a kernel is called once per fiber) and GCC warns "unsupported argument type ... for simd"
// for every kernel taking a struct (an Indexer) by value, a warning no flag turns off. So: flatten only.
#if defined(__GNUC__) && !defined(__clang__)
#undef __global__
#define __global__ __attribute__((flatten))
#endif
#else
#include <cuda_runtime.h>
#endif

#include "kernels/cuda/graph_capture.h"
#include "kernels/error.h"

namespace tapegrad::kernels::cuda {

#if defined(TAPEGRAD_CUDA_EMULATED)
using Stream = hipStream_t;
using RtError = hipError_t;
inline constexpr RtError kSuccess = hipSuccess;
inline const char* rt_error_string(RtError e) { return hipGetErrorString(e); }
#define TG_DYNAMIC_SHARED(T, name) HIP_DYNAMIC_SHARED(T, name)
#define TG_SHFL_XOR(v, mask) __shfl_xor((v), (mask), 32)
#define TG_RESTRICT __restrict__
#else
using Stream = cudaStream_t;
using RtError = cudaError_t;
inline constexpr RtError kSuccess = cudaSuccess;
inline const char* rt_error_string(RtError e) { return cudaGetErrorString(e); }
#define TG_DYNAMIC_SHARED(T, name)                               \
  extern __shared__ __align__(16) unsigned char tg_dynamic_smem[]; \
  T* name = reinterpret_cast<T*>(tg_dynamic_smem)
#define TG_SHFL_XOR(v, mask) __shfl_xor_sync(0xffffffffu, (v), (mask), 32)
#define TG_RESTRICT __restrict__
#endif

// Throws tapegrad::Error naming what failed ("cuda: cudaMalloc of 1048576 bytes: out of memory").
inline void check(RtError e, const char* what) {
  if (e != kSuccess) throw Error(fmt::format("cuda: {}: {}", what, rt_error_string(e)));
}

// The stream every kernel, copy and cuBLAS call of the backend is ordered on.
Stream stream();

// Launches kernel<<<grid, block, shared_bytes, stream()>>>(args...) and checks the launch.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, Args&&... args) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;  // nothing to do (an empty tensor)
#if defined(TAPEGRAD_CUDA_EMULATED)
  if (capturing()) {  // recorded with its arguments by value; replay() launches it
    record_operation([kernel, grid, block, shared_bytes, params = std::tuple<Params...>(static_cast<Params>(args)...)] {
      std::apply(
          [&](const auto&... p) {
            hipLaunchKernelGGL(kernel, grid, block, static_cast<std::uint32_t>(shared_bytes), stream(), p...);
          },
          params);
      check(hipGetLastError(), "kernel launch (graph replay)");
    });
    return;
  }
  hipLaunchKernelGGL(kernel, grid, block, static_cast<std::uint32_t>(shared_bytes), stream(),
                     static_cast<Params>(args)...);
  check(hipGetLastError(), "kernel launch");
#else
  kernel<<<grid, block, shared_bytes, stream()>>>(static_cast<Params>(args)...);
  check(cudaGetLastError(), "kernel launch");
#endif
}

// Blocks of `threads` covering n elements, capped (grid-stride loops cover the rest).
inline unsigned blocks_for(int64_t n, int threads, int64_t cap = 65535) {
  int64_t b = (n + threads - 1) / threads;
  if (b > cap) b = cap;
  return static_cast<unsigned>(b < 1 ? 1 : b);
}

// ---- errors found by kernels (bad indices) ----
// A kernel cannot throw, and checking indices on the host would cost a synchronisation per op.
// So a kernel that meets a bad index skips that element and records the first such event here;
// the backend reads the record at the next synchronisation (a device→host copy, synchronize())
// and throws tapegrad::Error then, naming the op, the index and the valid range.
// AttentionKeyCount (causal_attention_prefix's key count L outside [T, Tc]): value = L, limit = Tc,
// position = T.
enum class DeviceErrorCode : int {
  None = 0, IndexSelect, IndexAdd, Gather, ScatterAdd, CrossEntropyTarget, RopePosition, IndexCopy, AttentionKeyCount
};
struct DeviceErrorRecord {
  int code;
  long long value, limit, position;  // the bad index, the size it must stay below, its element
};
// The record in device memory (one per process).
DeviceErrorRecord* device_error_record();
// Throws if a kernel recorded an error since the last check, and clears the record. Called by
// the backend after each synchronisation (it synchronises itself to read the record).
void check_device_errors();

__device__ inline void report_bad_index(DeviceErrorRecord* rec, DeviceErrorCode code, long long value,
                                        long long limit, long long position) {
  if (atomicCAS(&rec->code, 0, static_cast<int>(code)) == 0) {
    rec->value = value;
    rec->limit = limit;
    rec->position = position;
  }
}

// ---- device-side helpers ----

// Sum / max over each aligned group of `Lanes` lanes (32: the warp; 16: lanes 0–15 and 16–31), by an
// XOR butterfly: masks below Lanes never leave the group, on a GPU and in HIP-CPU's 64-wide warps
// alike, and every lane gets the result. Call uniformly (see above).
template <int Lanes, class T>
__device__ inline T lanes_sum(T v) {
  for (int m = Lanes / 2; m > 0; m >>= 1) v += TG_SHFL_XOR(v, m);
  return v;
}
template <int Lanes, class T>
__device__ inline T lanes_max(T v) {
  for (int m = Lanes / 2; m > 0; m >>= 1) {
    const T o = TG_SHFL_XOR(v, m);
    v = o > v ? o : v;
  }
  return v;
}
template <class T>
__device__ inline T warp_sum(T v) {
  return lanes_sum<32>(v);
}
template <class T>
__device__ inline T warp_max(T v) {
  return lanes_max<32>(v);
}
template <class T>
__device__ inline T group16_sum(T v) {
  return lanes_sum<16>(v);
}
template <class T>
__device__ inline T group16_max(T v) {
  return lanes_max<16>(v);
}

// Sum over the block (blockDim.x threads, a multiple of 32); every thread gets the result.
// scratch: __shared__ T[32]. Ends with a barrier, so scratch can be reused right after.
template <class T>
__device__ inline T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = lane < warps ? scratch[lane] : T(0);
  total = warp_sum(total);
  __syncthreads();
  return total;
}
// Max over the block, like block_sum; `lowest` is the identity (−∞ for floats).
template <class T>
__device__ inline T block_max(T v, T* scratch, T lowest) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T m = lane < warps ? scratch[lane] : lowest;
  m = warp_max(m);
  __syncthreads();
  return m;
}

}  // namespace tapegrad::kernels::cuda
