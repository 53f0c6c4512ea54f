// memory.cu — the CUDA backend's device, stream and memory: a caching allocator, host↔device and
// device↔device copies, synchronisation (counted), and the per-device backend objects.
//
// The allocator: cudaMalloc/cudaFree synchronise the device and cost tens of microseconds, so a
// training step must not call them. Freed blocks go to a free list keyed by their size class
// (sizes rounded up: to 512 B below 1 MiB, to 2 MiB above) and are handed out again; all work is
// on one stream, so a block reused at once is only touched after the work that freed it.
// When cudaMalloc fails, the cache is released and the allocation tried once more.
//
// Graph pools (graph_capture.h): while a capture is in progress, allocations come from a pool private to
// that graph and blocks freed go to it, so that no block a graph's replay writes is ever handed to other
// work while the graph lives; the pool's blocks go back to the cache when the graph is destroyed.
// Stream copies during a capture are recorded (emulated build) or captured (nvcc); a device→host copy or
// synchronize() during a capture throws.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/graph_capture.h"
#include "kernels/cuda/memory_info.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {
namespace {

constexpr size_t kSmallRound = 512;
constexpr size_t kLargeThreshold = size_t{1} << 20;
constexpr size_t kLargeRound = size_t{2} << 20;

size_t size_class(size_t n) {
  if (n == 0) n = 1;
  const size_t round = n < kLargeThreshold ? kSmallRound : kLargeRound;
  return (n + round - 1) / round * round;
}

using FreeLists = std::map<size_t, std::vector<void*>>;  // size class → free blocks

// A block of the free lists of that size, removed from them; nullptr when there is none.
void* take(FreeLists& lists, size_t size) {
  auto it = lists.find(size);
  if (it == lists.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  return p;
}

class CachingAllocator {
 public:
  void* allocate(size_t nbytes) {
    const size_t size = size_class(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    void* p = nullptr;
    if (open_pool_ != 0) {  // a capture: the pool's own blocks, else the cache's or new ones, now the pool's
      GraphPool& pool = pools_.at(open_pool_);
      p = take(pool.free, size);
      if (p == nullptr) {
        p = take(free_, size);
        if (p == nullptr) p = driver_malloc(size);
        adopt(p, size, open_pool_);
      }
    } else {
      p = take(free_, size);
      if (p == nullptr) p = driver_malloc(size);
    }
    stats_.allocated_bytes += size;
    if (stats_.allocated_bytes > stats_.peak_allocated_bytes) stats_.peak_allocated_bytes = stats_.allocated_bytes;
    return p;
  }
  void deallocate(void* p, size_t nbytes) {
    if (p == nullptr) return;
    const size_t size = size_class(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.allocated_bytes -= size;
    auto owner = pool_of_.find(p);
    if (owner == pool_of_.end() && open_pool_ != 0) {  // freed during a capture: the graph may still use it
      adopt(p, size, open_pool_);
      owner = pool_of_.find(p);
    }
    if (owner == pool_of_.end()) {
      free_[size].push_back(p);
      return;
    }
    GraphPool& pool = pools_.at(owner->second);
    if (pool.alive) {
      pool.free[size].push_back(p);
      return;
    }
    disown(owner, size);  // its graph is gone: back to the cache
    free_[size].push_back(p);
  }

  uint64_t open_pool() {
    std::lock_guard<std::mutex> lock(mu_);
    TG_CHECK(open_pool_ == 0, "cuda: begin_capture: a CUDA graph capture is already in progress");
    open_pool_ = ++last_pool_;
    pools_[open_pool_];
    return open_pool_;
  }
  void stop_pool() {
    std::lock_guard<std::mutex> lock(mu_);
    open_pool_ = 0;
  }
  // The graph of `id` is gone: its free blocks return to the cache, the others when they are freed.
  void close_pool(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pools_.find(id);
    if (it == pools_.end()) return;
    if (open_pool_ == id) open_pool_ = 0;
    GraphPool& pool = it->second;
    pool.alive = false;
    for (auto& [size, blocks] : pool.free) {
      for (void* p : blocks) {
        pool_of_.erase(p);
        pool.bytes -= size;
        free_[size].push_back(p);
      }
    }
    pool.free.clear();
    if (pool.bytes == 0) pools_.erase(it);
  }
  size_t pool_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& [id, pool] : pools_) n += pool.alive ? pool.bytes : 0;
    return n;
  }
  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    release_locked();
  }
  MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }

 private:
  void* driver_malloc(size_t size) {
    void* p = nullptr;
#if defined(TAPEGRAD_CUDA_EMULATED)
    RtError e = hipMalloc(&p, size);
    if (e != kSuccess) {
      release_locked();
      e = hipMalloc(&p, size);
    }
#else
    RtError e = cudaMalloc(&p, size);
    if (e != kSuccess) {
      (void)cudaGetLastError();  // clear the sticky out-of-memory error
      release_locked();
      e = cudaMalloc(&p, size);
    }
#endif
    if (e != kSuccess) {
      throw Error(fmt::format("cuda: out of memory allocating {} bytes ({} bytes in use by tensors, {} reserved): {}",
                              size, stats_.allocated_bytes, stats_.reserved_bytes, rt_error_string(e)));
    }
    stats_.reserved_bytes += size;
    ++stats_.driver_allocations;
    return p;
  }
  void release_locked() {
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) {
#if defined(TAPEGRAD_CUDA_EMULATED)
        (void)hipFree(p);
#else
        (void)cudaFree(p);
#endif
        stats_.reserved_bytes -= size;
      }
      blocks.clear();
    }
  }

  struct GraphPool {
    FreeLists free;     // its blocks not in use
    size_t bytes = 0;   // all its blocks (free or in use)
    bool alive = true;  // false once its graph is destroyed (blocks in use then return to the cache when freed)
  };
  void adopt(void* p, size_t size, uint64_t id) {
    pool_of_[p] = id;
    pools_.at(id).bytes += size;
  }
  void disown(std::unordered_map<void*, uint64_t>::iterator owner, size_t size) {
    const uint64_t id = owner->second;
    pool_of_.erase(owner);
    GraphPool& pool = pools_.at(id);
    pool.bytes -= size;
    if (!pool.alive && pool.bytes == 0) pools_.erase(id);
  }

  std::mutex mu_;
  FreeLists free_;  // the cache: blocks anyone may get
  MemoryStats stats_;
  std::map<uint64_t, GraphPool> pools_;
  std::unordered_map<void*, uint64_t> pool_of_;  // block → its pool, for blocks owned by a graph pool
  uint64_t open_pool_ = 0;                       // the pool of the capture in progress (0: none)
  uint64_t last_pool_ = 0;
};

CachingAllocator& allocator() {
  // Never destroyed: tensors in static storage may be freed after it would have been.
  static CachingAllocator* a = new CachingAllocator();
  return *a;
}

std::atomic<uint64_t> g_syncs{0};

}  // namespace

Stream stream() {
  // One non-blocking stream for all work of the process (created on first use).
  static Stream s = [] {
    Stream st{};
#if defined(TAPEGRAD_CUDA_EMULATED)
    check(hipStreamCreate(&st), "hipStreamCreate");
#else
    check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
#endif
    return st;
  }();
  return s;
}

int device_count() {
  static const int n = [] {
    int count = 0;
#if defined(TAPEGRAD_CUDA_EMULATED)
    if (hipGetDeviceCount(&count) != kSuccess) count = 0;
#else
    if (cudaGetDeviceCount(&count) != kSuccess) {
      (void)cudaGetLastError();  // no driver or no device: report zero devices
      count = 0;
    }
#endif
    return count;
  }();
  return n;
}

bool is_emulated() {
#if defined(TAPEGRAD_CUDA_EMULATED)
  return true;
#else
  return false;
#endif
}

CudaBackend& cuda_backend(int index) {
  const int n = device_count();
  TG_CHECK(index >= 0 && index < n, "device cuda:{}: {}", index,
           n == 0 ? std::string("no CUDA device is visible to this process")
                  : fmt::format("this machine has {} CUDA device(s) (cuda:0 .. cuda:{})", n, n - 1));
  TG_CHECK(index == 0, "device cuda:{}: only cuda:0 is supported by this build (one device per process)", index);
  static CudaBackend b(0);
  return b;
}

namespace {
const char* error_op_name(int code) {
  switch (static_cast<DeviceErrorCode>(code)) {
    case DeviceErrorCode::IndexSelect: return "index_select";
    case DeviceErrorCode::IndexAdd: return "index_add";
    case DeviceErrorCode::Gather: return "gather";
    case DeviceErrorCode::ScatterAdd: return "scatter_add";
    case DeviceErrorCode::CrossEntropyTarget: return "cross_entropy: target";
    case DeviceErrorCode::RopePosition: return "rope: position";
    case DeviceErrorCode::IndexCopy: return "index_copy";
    case DeviceErrorCode::AttentionKeyCount: return "causal_attention_prefix";
    case DeviceErrorCode::None: break;
  }
  return "kernel";
}
}  // namespace

// The record kernels report bad indices into: allocated (zeroed) on first use, freed only by
// release_process_resources(). Read on every launch that validates indices, hence the atomic.
std::mutex g_record_mutex;
std::atomic<DeviceErrorRecord*> g_record{nullptr};

DeviceErrorRecord* device_error_record() {
  if (DeviceErrorRecord* rec = g_record.load(std::memory_order_acquire)) return rec;
  std::lock_guard<std::mutex> lock(g_record_mutex);
  if (DeviceErrorRecord* rec = g_record.load(std::memory_order_relaxed)) return rec;
  void* p = allocator().allocate(sizeof(DeviceErrorRecord));
  const DeviceErrorRecord zero{0, 0, 0, 0};
#if defined(TAPEGRAD_CUDA_EMULATED)
  check(hipMemcpy(p, &zero, sizeof zero, hipMemcpyHostToDevice), "error record");
#else
  check(cudaMemcpy(p, &zero, sizeof zero, cudaMemcpyHostToDevice), "error record");
#endif
  g_record.store(static_cast<DeviceErrorRecord*>(p), std::memory_order_release);
  return static_cast<DeviceErrorRecord*>(p);
}

void check_device_errors() {
  DeviceErrorRecord host{0, 0, 0, 0};
  const DeviceErrorRecord zero{0, 0, 0, 0};
#if defined(TAPEGRAD_CUDA_EMULATED)
  check(hipMemcpyAsync(&host, device_error_record(), sizeof host, hipMemcpyDeviceToHost, stream()), "error record");
  check(hipStreamSynchronize(stream()), "error record");
  if (host.code == 0) return;
  check(hipMemcpy(device_error_record(), &zero, sizeof zero, hipMemcpyHostToDevice), "error record");
#else
  check(cudaMemcpyAsync(&host, device_error_record(), sizeof host, cudaMemcpyDeviceToHost, stream()), "error record");
  check(cudaStreamSynchronize(stream()), "error record");
  if (host.code == 0) return;
  check(cudaMemcpy(device_error_record(), &zero, sizeof zero, cudaMemcpyHostToDevice), "error record");
#endif
  if (static_cast<DeviceErrorCode>(host.code) == DeviceErrorCode::AttentionKeyCount)
    throw Error(fmt::format("{}: key_count {} is outside [{}, {}] (it must be at least the {} query rows and at most "
                            "the {} keys of k, v; found on the GPU, reported at the next synchronisation; out and "
                            "lse were not written)",
                            error_op_name(host.code), host.value, host.position, host.limit, host.position,
                            host.limit));
  if (static_cast<DeviceErrorCode>(host.code) == DeviceErrorCode::IndexCopy)
    throw Error(fmt::format("{}: index {} is out of range [0, {}) at element {} (found on the GPU, reported at "
                            "the next synchronisation; nothing was written)",
                            error_op_name(host.code), host.value, host.limit, host.position));
  throw Error(fmt::format("{}: index {} is out of range [0, {}) at element {} (found on the GPU, reported at "
                          "the next synchronisation; the elements with bad indices were not written)",
                          error_op_name(host.code), host.value, host.limit, host.position));
}

MemoryStats memory_stats() { return allocator().stats(); }
void reset_peak_memory_stats() { allocator().reset_peak(); }
size_t device_total_bytes() {
  size_t free_bytes = 0, total_bytes = 0;
#if defined(TAPEGRAD_CUDA_EMULATED)
  check(hipMemGetInfo(&free_bytes, &total_bytes), "hipMemGetInfo");
#else
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
#endif
  return total_bytes;
}
void empty_cache() { allocator().empty_cache(); }

void release_process_resources() {
  refuse_during_capture("release_process_resources()");
#if defined(TAPEGRAD_CUDA_EMULATED)
  check(hipDeviceSynchronize(), "release_process_resources");
#else
  check(cudaDeviceSynchronize(), "release_process_resources");
#endif
  release_cublas_handle();
#if !defined(TAPEGRAD_CUDA_EMULATED)
  release_host_staging();
#endif
  {
    std::lock_guard<std::mutex> lock(g_record_mutex);
    if (DeviceErrorRecord* rec = g_record.exchange(nullptr)) allocator().deallocate(rec, sizeof(DeviceErrorRecord));
  }
  allocator().empty_cache();
}
uint64_t sync_count() { return g_syncs.load(); }

uint64_t open_graph_pool() { return allocator().open_pool(); }
void stop_graph_pool() { allocator().stop_pool(); }
void close_graph_pool(uint64_t pool) { allocator().close_pool(pool); }
size_t graph_pool_bytes() { return allocator().pool_bytes(); }

void* CudaBackend::allocate(size_t nbytes) { return allocator().allocate(nbytes); }
void CudaBackend::deallocate(void* p, size_t nbytes) { allocator().deallocate(p, nbytes); }

#if defined(TAPEGRAD_CUDA_EMULATED)
void CudaBackend::copy_from_host(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  if (capturing()) {  // recorded: the source is kept by the graph, each replay copies it again
    const void* held = hold_for_capture(src, nbytes);
    record_operation([dst, held, nbytes] {
      check(hipMemcpyAsync(dst, held, nbytes, hipMemcpyHostToDevice, stream()), "copy host to device (graph replay)");
    });
    return;
  }
  // Stream-ordered and synchronous for the host buffer (it may be freed right after).
  check(hipMemcpyAsync(dst, src, nbytes, hipMemcpyHostToDevice, stream()), "copy host to device");
  check(hipStreamSynchronize(stream()), "copy host to device");
}
void CudaBackend::copy_to_host(void* dst, const void* src, size_t nbytes) {
  refuse_during_capture("a device->host copy (item(), to_vector(), to(cpu))");
  ++g_syncs;
  if (nbytes == 0) return;
  check(hipMemcpyAsync(dst, src, nbytes, hipMemcpyDeviceToHost, stream()), "copy device to host");
  check(hipStreamSynchronize(stream()), "copy device to host");
  check_device_errors();
}
void CudaBackend::copy_on_device(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  if (capturing()) {
    record_operation([dst, src, nbytes] {
      check(hipMemcpyAsync(dst, src, nbytes, hipMemcpyDeviceToDevice, stream()),
            "copy device to device (graph replay)");
    });
    return;
  }
  check(hipMemcpyAsync(dst, src, nbytes, hipMemcpyDeviceToDevice, stream()), "copy device to device");
}
void CudaBackend::synchronize() {
  refuse_during_capture("synchronize()");
  ++g_syncs;
  check(hipStreamSynchronize(stream()), "synchronize");
  check_device_errors();
}
#else
void CudaBackend::copy_from_host(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  if (capturing()) {  // captured from pinned memory the graph keeps: each replay copies it again
    check(cudaMemcpyAsync(dst, hold_for_capture(src, nbytes), nbytes, cudaMemcpyHostToDevice, stream()),
          "copy host to device (captured)");
    return;
  }
  // Through pinned staging (never waits for the GPU; host_staging.cu). Larger copies (weights) from
  // pageable memory: cudaMemcpyAsync returns once the source is staged by the driver, so the caller
  // may reuse its buffer; the copy itself is ordered on the stream.
  if (copy_from_host_staged(dst, src, nbytes)) return;
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream()), "copy host to device");
}
void CudaBackend::copy_to_host(void* dst, const void* src, size_t nbytes) {
  refuse_during_capture("a device->host copy (item(), to_vector(), to(cpu))");
  ++g_syncs;
  if (nbytes == 0) return;
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream()), "copy device to host");
  check(cudaStreamSynchronize(stream()), "copy device to host");
  check_device_errors();
}
void CudaBackend::copy_on_device(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream()), "copy device to device");
}
void CudaBackend::synchronize() {
  refuse_during_capture("synchronize()");
  ++g_syncs;
  check(cudaStreamSynchronize(stream()), "synchronize");
  check_device_errors();
}
#endif

}  // namespace tapegrad::kernels::cuda
