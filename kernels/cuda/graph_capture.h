// graph_capture.h — the CUDA backend's side of a capture (Backend::begin_capture / end_capture,
// kernels/device_graph.h), between graph.cu (the capture and the graphs), memory.cu (the allocator and
// the stream copies) and runtime.h (launch()). No CUDA types.
//
// Under nvcc the stream itself is captured (cudaStreamBeginCapture … cudaStreamEndCapture,
// cudaGraphInstantiate, cudaGraphLaunch): nothing queued on it runs until replay. HIP-CPU has no graphs,
// so the emulated build records instead: while capturing, launch() and every stream operation of
// memory.cu (device↔device and host→device copies) append a closure holding its arguments by value, and
// replay() runs the closures in order — the same semantics, so CI tests them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

namespace tapegrad::kernels::cuda {

// True while a capture is in progress (any thread: there is one stream).
bool capturing();
// Throws tapegrad::Error "cuda: <what> during CUDA graph capture: …" while capturing (a device→host copy,
// synchronize(): a captured step must leave its results on the device and read them after replay).
void refuse_during_capture(const char* what);
// A copy of n bytes of host memory that lives as long as the graph being captured (pinned under nvcc): a
// host→device copy recorded now reads it at every replay, long after the caller's buffer is gone.
const void* hold_for_capture(const void* src, size_t n);
#if defined(TAPEGRAD_CUDA_EMULATED)
// Appends a stream operation to the capture in progress (emulated build; call only while capturing()).
void record_operation(std::function<void()> op);
#endif

// ---- the allocator's graph pools (memory.cu) ----
// While a pool is open, every allocation comes from it: its own free blocks, else a block taken from the
// backend's cache, else the driver; a block freed while it is open (wherever it came from) joins it. A
// pool's blocks are handed only to its own graph's capture; close_graph_pool() (the graph destroyed) puts
// its free blocks back into the cache, and its blocks still in use go there when they are freed.
uint64_t open_graph_pool();        // a new pool, open (one at a time)
void stop_graph_pool();            // allocations come from the cache again; the pool stays the graph's
void close_graph_pool(uint64_t pool);
// Bytes held by live graphs' pools (in use or free), for tests and memory reports.
size_t graph_pool_bytes();

// Called by begin_capture before the capture starts: what the backend creates on first use (the device
// error record, the cuBLAS handle and its fixed workspace) must exist outside every graph.
void ensure_cublas_handle();  // matmul.cu (nothing in the emulated build)

}  // namespace tapegrad::kernels::cuda
