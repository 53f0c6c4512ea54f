// atomic_file.cpp — temp file, fsync, rename, fsync of the directory (see atomic_file.h).
#include "autograd/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kernels/error.h"

namespace tapegrad::io {

AtomicFile::AtomicFile(const std::string& target, std::string who)
    : target_(target), who_(std::move(who)), name_(target + ".tmp.XXXXXX") {
  fd_ = ::mkstemp(name_.data());
  TG_CHECK(fd_ >= 0, "{}: cannot write '{}': cannot create a temporary file next to it: {}", who_, target_,
           std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(name_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  written_ += n;
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    TG_CHECK(w > 0, "{}: writing '{}' failed: {}", who_, name_, std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

uint64_t AtomicFile::commit() {
  TG_CHECK(::fchmod(fd_, 0644) == 0, "{}: chmod of '{}' failed: {}", who_, name_, std::strerror(errno));
  TG_CHECK(::fsync(fd_) == 0, "{}: fsync of '{}' failed: {}", who_, name_, std::strerror(errno));
  int fd = fd_;
  fd_ = -1;
  TG_CHECK(::close(fd) == 0, "{}: closing '{}' failed: {}", who_, name_, std::strerror(errno));
  TG_CHECK(::rename(name_.c_str(), target_.c_str()) == 0, "{}: renaming '{}' to '{}' failed: {}", who_, name_, target_,
           std::strerror(errno));
  committed_ = true;
  // Make the rename itself durable (best effort: some filesystems refuse fsync on a directory).
  const std::string dir = target_.find('/') == std::string::npos ? "." : target_.substr(0, target_.rfind('/') + 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return written_;
}

}  // namespace tapegrad::io
