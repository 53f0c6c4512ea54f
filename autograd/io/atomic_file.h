// atomic_file.h — a file that appears whole or not at all: written to a temp file beside the target
// (mkstemp), then fsync, rename over the target and fsync of the directory on commit(); removed if it
// is destroyed uncommitted (an error on the way leaves the old file untouched). Used by the safetensors
// writer (checkpoints, int8 models) and by `export llama2c`. Messages start with `who`.
#pragma once
#include <cstdint>
#include <string>

namespace tapegrad::io {

class AtomicFile {
 public:
  AtomicFile(const std::string& target, std::string who);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  // Makes the file the target; returns the bytes written.
  uint64_t commit();

 private:
  std::string target_, who_, name_;
  int fd_ = -1;
  bool committed_ = false;
  uint64_t written_ = 0;
};

}  // namespace tapegrad::io
