// file_io.cpp — reads through std::ifstream; atomic writes with POSIX open/write/fsync/rename.
#include "data/file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include "kernels/error.h"

namespace tapegrad::data {

std::string read_whole_file(const std::string& path, std::string_view who) {
  // An ifstream opens a directory and reads it as empty: refuse it by name.
  std::error_code ignored;
  TG_CHECK(!std::filesystem::is_directory(path, ignored), "{}: {} is a directory, not a file", who, path);
  std::ifstream in(path, std::ios::binary);
  TG_CHECK(in.good(), "{}: cannot open {}", who, path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  TG_CHECK(!in.bad(), "{}: error reading {}", who, path);
  return buffer.str();
}

void write_file_atomic(const std::string& path, std::string_view bytes, std::string_view who) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TG_CHECK(fd >= 0, "{}: cannot write {} (temp file {}): {}", who, path, tmp, std::strerror(errno));
  std::string error;  // empty while all is well
  for (size_t done = 0; done < bytes.size() && error.empty();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) error = std::strerror(n < 0 ? errno : EIO);
    else done += size_t(n);
  }
  if (error.empty() && ::fsync(fd) != 0) error = std::strerror(errno);
  if (::close(fd) != 0 && error.empty()) error = std::strerror(errno);
  if (error.empty() && std::rename(tmp.c_str(), path.c_str()) != 0) error = std::strerror(errno);
  if (!error.empty()) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: cannot write {}: {}", who, path, error));
  }
}

}  // namespace tapegrad::data
