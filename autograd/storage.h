// storage.h — Storage: one reference-counted buffer on a device. Views (transpose, slice, …)
// share it through shared_ptr; it frees itself through its backend when the last view goes.
// `version` counts in-place writes: a tensor saved for backward remembers the version it saw,
// so a later in-place change is caught instead of silently corrupting the gradient.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"

namespace tapegrad {

class Storage {
 public:
  Storage(size_t nbytes, Device device)
      : backend_(&kernels::backend(device)), nbytes_(nbytes), device_(device) {
    data_ = backend_->allocate(nbytes);
  }
  ~Storage() { backend_->deallocate(data_, nbytes_); }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  kernels::Backend& backend() const { return *backend_; }
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  kernels::Backend* backend_;
  void* data_ = nullptr;
  size_t nbytes_;
  Device device_;
  uint64_t version_ = 0;
};

}  // namespace tapegrad
