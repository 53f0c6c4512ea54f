// graph.cu — CUDA graphs: CudaBackend::begin_capture / end_capture and the graphs they return
// (kernels/device_graph.h; the capture's internals in graph_capture.h).
//
// nvcc: begin_capture puts the backend's stream into capture (cudaStreamBeginCapture, relaxed mode: the
// allocator may still call cudaMalloc and the staging cudaHostAlloc while capturing), end_capture ends it
// and instantiates the graph (cudaStreamEndCapture, cudaGraphInstantiate); replay() is one
// cudaGraphLaunch on the stream. Emulated (HIP-CPU has no graphs): the capture is a list of closures
// appended by launch() (runtime.h) and by memory.cu's stream copies; replay() runs them in order, each
// queuing its kernel or copy on the stream as it would have been queued eagerly.
// Both: host memory a recorded host→device copy reads (hold_for_capture) and the allocator's pool of the
// graph (memory.cu) live as long as the graph. Destroying a graph waits for its replays to finish (its
// host sources are freed), then hands its pool back to the cache.
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/graph_capture.h"
#include "kernels/cuda/runtime.h"
#include "kernels/device_graph.h"

namespace tapegrad::kernels::cuda {
namespace {

// n bytes of host memory owned by a graph: pinned under nvcc (a captured copy reads it with DMA at every
// replay), ordinary in the emulated build.
class HeldHostBuffer {
 public:
  explicit HeldHostBuffer(size_t n) {
#if defined(TAPEGRAD_CUDA_EMULATED)
    data_ = ::operator new(n);
#else
    check(cudaHostAlloc(&data_, n, cudaHostAllocDefault), "CUDA graph capture: cudaHostAlloc of a copy's source");
#endif
  }
  ~HeldHostBuffer() {
    if (data_ == nullptr) return;
#if defined(TAPEGRAD_CUDA_EMULATED)
    ::operator delete(data_);
#else
    (void)cudaFreeHost(data_);
#endif
  }
  HeldHostBuffer(HeldHostBuffer&& o) noexcept : data_(o.data_) { o.data_ = nullptr; }
  HeldHostBuffer(const HeldHostBuffer&) = delete;
  HeldHostBuffer& operator=(const HeldHostBuffer&) = delete;
  HeldHostBuffer& operator=(HeldHostBuffer&&) = delete;
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

// What a capture collects; handed to its graph by end_capture.
struct CaptureState {
  uint64_t pool = 0;                  // the allocator's pool of this graph
  std::vector<HeldHostBuffer> held;   // sources of the recorded host→device copies
#if defined(TAPEGRAD_CUDA_EMULATED)
  std::vector<std::function<void()>> operations;  // launches and copies, in stream order
#endif
};

std::mutex g_mutex;
std::unique_ptr<CaptureState> g_capture;  // the capture in progress (guarded by g_mutex)
std::atomic<bool> g_capturing{false};

// Waits for the stream (the graph's replays) before the graph's host sources are freed; errors are
// ignored (a destructor) — the next synchronisation reports them.
void wait_for_stream() {
#if defined(TAPEGRAD_CUDA_EMULATED)
  (void)hipStreamSynchronize(stream());
#else
  (void)cudaStreamSynchronize(stream());
#endif
}

#if defined(TAPEGRAD_CUDA_EMULATED)
class RecordedGraph final : public DeviceGraph {
 public:
  explicit RecordedGraph(CaptureState state) : state_(std::move(state)) {}
  ~RecordedGraph() override {
    wait_for_stream();
    close_graph_pool(state_.pool);
  }
  void replay() override {
    TG_CHECK(!capturing(), "cuda: replay() of a CUDA graph during another graph's capture");
    for (const auto& op : state_.operations) op();
  }

 private:
  CaptureState state_;
};
#else
class CudaGraph final : public DeviceGraph {
 public:
  CudaGraph(cudaGraphExec_t exec, CaptureState state) : exec_(exec), state_(std::move(state)) {}
  ~CudaGraph() override {
    wait_for_stream();
    (void)cudaGraphExecDestroy(exec_);
    close_graph_pool(state_.pool);
  }
  void replay() override {
    TG_CHECK(!capturing(), "cuda: replay() of a CUDA graph during another graph's capture");
    check(cudaGraphLaunch(exec_, stream()), "cudaGraphLaunch");
  }

 private:
  cudaGraphExec_t exec_;
  CaptureState state_;
};
#endif

}  // namespace

bool capturing() { return g_capturing.load(std::memory_order_acquire); }

void refuse_during_capture(const char* what) {
  if (!capturing()) return;
  throw Error(fmt::format("cuda: {} during CUDA graph capture: a captured step must leave its results on the "
                          "device and read them after replay()",
                          what));
}

const void* hold_for_capture(const void* src, size_t n) {
  std::lock_guard<std::mutex> lock(g_mutex);
  TG_CHECK(g_capture != nullptr, "cuda: hold_for_capture: no CUDA graph capture is in progress");
  HeldHostBuffer& b = g_capture->held.emplace_back(n);
  std::memcpy(b.data(), src, n);
  return b.data();
}

#if defined(TAPEGRAD_CUDA_EMULATED)
void record_operation(std::function<void()> op) {
  std::lock_guard<std::mutex> lock(g_mutex);
  TG_CHECK(g_capture != nullptr, "cuda: record_operation: no CUDA graph capture is in progress");
  g_capture->operations.push_back(std::move(op));
}
#endif

bool CudaBackend::begin_capture() {
  TG_CHECK(!capturing(), "cuda: begin_capture: a CUDA graph capture is already in progress");
  // Made on first use, so made now: they belong to the process, not to the graph's pool.
  (void)device_error_record();
  ensure_cublas_handle();
  auto state = std::make_unique<CaptureState>();
  state->pool = open_graph_pool();
#if !defined(TAPEGRAD_CUDA_EMULATED)
  const RtError e = cudaStreamBeginCapture(stream(), cudaStreamCaptureModeRelaxed);
  if (e != kSuccess) {
    stop_graph_pool();
    close_graph_pool(state->pool);
    check(e, "cudaStreamBeginCapture");
  }
#endif
  std::lock_guard<std::mutex> lock(g_mutex);
  g_capture = std::move(state);
  g_capturing.store(true, std::memory_order_release);
  return true;
}

std::unique_ptr<DeviceGraph> CudaBackend::end_capture() {
  std::unique_ptr<CaptureState> state;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    TG_CHECK(g_capture != nullptr, "cuda: end_capture: no CUDA graph capture is in progress");
    state = std::move(g_capture);
    g_capturing.store(false, std::memory_order_release);
  }
  stop_graph_pool();
#if defined(TAPEGRAD_CUDA_EMULATED)
  return std::make_unique<RecordedGraph>(std::move(*state));
#else
  cudaGraph_t graph = nullptr;
  RtError e = cudaStreamEndCapture(stream(), &graph);
  cudaGraphExec_t exec = nullptr;
  if (e == kSuccess) {
    e = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
  }
  if (e != kSuccess) {
    (void)cudaGetLastError();
    close_graph_pool(state->pool);
    check(e, "cudaStreamEndCapture / cudaGraphInstantiate (the captured work cannot be made a graph)");
  }
  return std::make_unique<CudaGraph>(exec, std::move(*state));
#endif
}

}  // namespace tapegrad::kernels::cuda
