// device_graph.h — a recorded stretch of a backend's device work (a CUDA graph), replayed with one call.
//
//   std::unique_ptr<DeviceGraph> g = capture_device_work(backend, [&] { ...ops on backend's tensors... });
//   if (g) g->replay();   // the same kernels and copies again, with the same pointers and arguments
//
// (capture_device_work and Backend::begin_capture / end_capture: kernels/backend.h.) While a capture is in
// progress the backend's kernels and stream copies are recorded, NOT run (the first replay does the work).
// So everything that changes between replays must be read from device memory by the recorded kernels
// (written there before replay()), and nothing captured may read device memory back on the host (a
// device→host copy or synchronize() throws "… during CUDA graph capture"). Memory allocated during a
// capture comes from a pool private to the graph: its blocks are never handed to other work while the
// graph lives (a replay writes them again) and go back to the backend's cache when the graph is
// destroyed. docs/cuda.md "CUDA graphs" says what is captured and why.
#pragma once

namespace tapegrad::kernels {

class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  // Queues the captured work on the backend's stream, in capture order (asynchronous, like a launch).
  virtual void replay() = 0;
};

}  // namespace tapegrad::kernels
