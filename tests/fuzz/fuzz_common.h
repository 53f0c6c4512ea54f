// fuzz_common.h — helpers shared by the libFuzzer targets in tests/fuzz/ (see docs/fuzzing.md).
//
// Every target defines LLVMFuzzerTestOneInput and follows one rule: bad input may only surface as
// tapegrad::Error (caught by the target); any other exception escapes (std::terminate → abort, which
// libFuzzer and the replay driver report as a crash), and a broken property (a round trip that does
// not give back what went in, a promise of the reader that does not hold) aborts through FUZZ_ASSERT.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

namespace tapegrad::fuzz {

// Prints what broke and aborts (never an exception: nothing may catch a broken property).
[[noreturn]] inline void property_failed(const char* expr, const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "%s:%d: fuzz property violated: %s\n  %s\n", file, line, expr, what.c_str());
  std::fflush(stderr);
  std::abort();
}

#define FUZZ_ASSERT(cond, what)                                                                    \
  do {                                                                                             \
    if (!(cond)) ::tapegrad::fuzz::property_failed(#cond, __FILE__, __LINE__, std::string(what)); \
  } while (0)

// With TAPEGRAD_FUZZ_VERBOSE set, prints why the reader refused an input (to check that seeds load).
inline void note_rejected(const char* what) {
  static const bool verbose = std::getenv("TAPEGRAD_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "  rejected: %s\n", what);
}

inline std::string_view as_view(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Writes all of `bytes` to the descriptor (from offset 0, truncating what was there).
inline void write_fd(int fd, std::string_view bytes) {
  if (::ftruncate(fd, 0) != 0 || ::lseek(fd, 0, SEEK_SET) != 0) std::abort();
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) std::abort();
    done += size_t(n);
  }
}

// An in-memory file (memfd) reopened by path (/proc/self/fd/N): readers that take a path read the
// fuzz input without touching the disk. One per target and name, reused for every input.
class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(::memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  // Replaces the contents; returns the path to open.
  const std::string& set(std::string_view bytes) {
    write_fd(fd_, bytes);
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// A private directory (on /dev/shm when it exists: tmpfs, so fast) for readers and writers that
// need real directory entries (atomic saves rename a temp file in the same directory); removed at exit.
class ScratchDir {
 public:
  ScratchDir() {
    namespace fs = std::filesystem;
    const char* base = fs::is_directory("/dev/shm") ? "/dev/shm" : nullptr;
    std::string tmpl = (base ? fs::path(base) : fs::temp_directory_path()).string() + "/tapegrad_fuzz.XXXXXX";
    if (!::mkdtemp(tmpl.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    dir_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return dir_; }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  // Writes `name` in the directory with exactly `bytes`.
  std::string write(const std::string& name, std::string_view bytes) const {
    const std::string p = file(name);
    std::FILE* f = std::fopen(p.c_str(), "wb");
    if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
      std::perror(p.c_str());
      std::abort();
    }
    return p;
  }
  void remove(const std::string& name) const {
    std::error_code ec;
    std::filesystem::remove(file(name), ec);
  }

 private:
  std::string dir_;
};

// Splits `input` at the first `sep` byte: {before, after}; no separator gives {input, ""} and found = false.
struct Split {
  std::string_view first, second;
  bool found = false;
};
inline Split split_at(std::string_view input, char sep) {
  const size_t at = input.find(sep);
  if (at == std::string_view::npos) return {input, {}, false};
  return {input.substr(0, at), input.substr(at + 1), true};
}

}  // namespace tapegrad::fuzz
