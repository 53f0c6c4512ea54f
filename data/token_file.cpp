// token_file.cpp — header encode/decode, the streaming writer and the mmap reader (POSIX).
#include "data/token_file.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/error.h"

namespace tapegrad::data {
namespace {

void put_le(unsigned char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

// The index of the first token >= vocab among count tokens of `width` bytes (little-endian), or
// count when there is none. Blocks of 4096 are reduced to their maximum first (a loop the compiler
// vectorizes; memcpy is its unaligned load); only a block whose maximum is too large is searched.
template <class Id>
uint64_t first_at_or_above_native(const unsigned char* tokens, uint64_t count, uint64_t vocab) {
  constexpr uint64_t kBlock = 4096;
  auto id_at = [&](uint64_t i) {
    Id v;
    std::memcpy(&v, tokens + i * sizeof(Id), sizeof(Id));
    return v;
  };
  for (uint64_t begin = 0; begin < count; begin += kBlock) {
    const uint64_t end = std::min(count, begin + kBlock);
    Id biggest = 0;
    for (uint64_t i = begin; i < end; ++i) biggest = std::max(biggest, id_at(i));
    if (uint64_t(biggest) < vocab) continue;
    for (uint64_t i = begin; i < end; ++i)
      if (uint64_t(id_at(i)) >= vocab) return i;
  }
  return count;
}

uint64_t first_id_at_or_above(const unsigned char* tokens, uint64_t count, uint32_t width, uint64_t vocab) {
  if constexpr (std::endian::native == std::endian::little) {
    return width == 2 ? first_at_or_above_native<uint16_t>(tokens, count, vocab)
                      : first_at_or_above_native<uint32_t>(tokens, count, vocab);
  }
  for (uint64_t i = 0; i < count; ++i)
    if (get_le(tokens + i * width, int(width)) >= vocab) return i;
  return count;
}

// RAII file descriptor.
struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

}  // namespace

TokenFileWriter::TokenFileWriter(const std::string& path, uint64_t vocab_size)
    : path_(path), vocab_size_(vocab_size), width_(vocab_size <= 65536 ? 2 : 4) {
  TG_CHECK(vocab_size > 0 && vocab_size <= (uint64_t(1) << 32), "TokenFileWriter: {}: vocab_size {} must be in 1..2^32",
           path, vocab_size);
  file_.reset(std::fopen(path.c_str(), "wb"));
  TG_CHECK(file_ != nullptr, "TokenFileWriter: cannot create {}: {}", path, std::strerror(errno));
  unsigned char header[kTokenFileHeaderBytes] = {};
  std::memcpy(header, kTokenFileMagic, 8);
  put_le(header + 8, kTokenFileVersion, 4);
  put_le(header + 12, width_, 4);
  put_le(header + 24, vocab_size_, 8);
  TG_CHECK(std::fwrite(header, 1, sizeof header, file_.get()) == sizeof header, "TokenFileWriter: {}: write failed",
           path);
}

TokenFileWriter::~TokenFileWriter() {
  try {
    close();
  } catch (...) {  // destructors must not throw; close() reports errors to callers who ask
  }
}

void TokenFileWriter::write(std::span<const uint32_t> tokens) {
  TG_CHECK(file_ != nullptr, "TokenFileWriter: {}: write after close", path_);
  if (tokens.empty()) return;  // fwrite must not get the null pointer of an empty buffer
  std::vector<unsigned char> buffer(tokens.size() * width_);
  for (size_t i = 0; i < tokens.size(); ++i) {
    TG_CHECK(tokens[i] < vocab_size_, "TokenFileWriter: {}: token {} (at {}) is not below vocab_size {}", path_,
             tokens[i], count_ + i, vocab_size_);
    put_le(buffer.data() + i * width_, tokens[i], int(width_));
  }
  TG_CHECK(std::fwrite(buffer.data(), 1, buffer.size(), file_.get()) == buffer.size(),
           "TokenFileWriter: {}: write failed at token {}", path_, count_);
  count_ += tokens.size();
}

void TokenFileWriter::close() {
  if (!file_) return;
  auto file = std::move(file_);
  unsigned char count_bytes[8];
  put_le(count_bytes, count_, 8);
  TG_CHECK(std::fseek(file.get(), 16, SEEK_SET) == 0 && std::fwrite(count_bytes, 1, 8, file.get()) == 8 &&
               std::fflush(file.get()) == 0,
           "TokenFileWriter: {}: cannot write the token count into the header", path_);
}

void write_token_file(const std::string& path, std::span<const uint32_t> tokens, uint64_t vocab_size) {
  TokenFileWriter writer(path, vocab_size);
  writer.write(tokens);
  writer.close();
}

TokenFile::TokenFile(const std::string& path) : path_(path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  TG_CHECK(fd.fd >= 0, "TokenFile: cannot open {}: {}", path, std::strerror(errno));
  struct stat st {};
  TG_CHECK(::fstat(fd.fd, &st) == 0, "TokenFile: cannot stat {}: {}", path, std::strerror(errno));
  const auto file_bytes = static_cast<uint64_t>(st.st_size);
  TG_CHECK(file_bytes >= kTokenFileHeaderBytes, "TokenFile: {}: {} bytes is shorter than the {}-byte header", path,
           file_bytes, kTokenFileHeaderBytes);
  map_ = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  TG_CHECK(map_ != MAP_FAILED, "TokenFile: cannot map {}: {}", path, std::strerror(errno));
  map_bytes_ = file_bytes;
  auto fail = [&](const std::string& message) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw Error(message);
  };
  const auto* bytes = static_cast<const unsigned char*>(map_);
  if (std::memcmp(bytes, kTokenFileMagic, 8) != 0) fail(fmt::format("TokenFile: {}: offset 0: wrong magic (not a TGTOKENS file)", path));
  const uint64_t version = get_le(bytes + 8, 4);
  if (version != kTokenFileVersion)
    fail(fmt::format("TokenFile: {}: offset 8: version {} is not supported (expected {})", path, version,
                     kTokenFileVersion));
  width_ = uint32_t(get_le(bytes + 12, 4));
  if (width_ != 2 && width_ != 4) fail(fmt::format("TokenFile: {}: offset 12: token width {} is not 2 or 4", path, width_));
  count_ = get_le(bytes + 16, 8);
  vocab_size_ = get_le(bytes + 24, 8);
  const uint64_t body = file_bytes - kTokenFileHeaderBytes;
  if (count_ > body / width_ || body != count_ * width_)
    fail(fmt::format("TokenFile: {}: header says {} tokens of {} bytes ({} bytes) but the body after offset {} has {} "
                     "bytes (truncated or corrupt)",
                     path, count_, width_, count_ * width_, kTokenFileHeaderBytes, body));
  if (vocab_size_ == 0 || vocab_size_ > (uint64_t(1) << 32) || (width_ == 2 && vocab_size_ > 65536))
    fail(fmt::format("TokenFile: {}: offset 24: vocab_size {} does not fit {}-byte tokens (1..{})", path, vocab_size_,
                     width_, width_ == 2 ? 65536 : uint64_t(1) << 32));
  tokens_ = bytes + kTokenFileHeaderBytes;
  // The header promises every id < vocab_size: hold the file to it now, not as an embedding index
  // error in the middle of training. One pass: 29 ms for a 200 MB file in the page cache (docs/reliability.md).
  const uint64_t bad = first_id_at_or_above(tokens_, count_, width_, vocab_size_);
  if (bad < count_)
    fail(fmt::format("TokenFile: {}: offset {}: token {} (index {}) is not below the header's vocab_size {}", path,
                     kTokenFileHeaderBytes + bad * width_, (*this)[bad], bad, vocab_size_));
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

uint32_t TokenFile::operator[](uint64_t i) const {
  assert(i < count_);
  return uint32_t(get_le(tokens_ + i * width_, int(width_)));
}

uint32_t TokenFile::at(uint64_t i) const {
  TG_CHECK(i < count_, "TokenFile: {}: token index {} is outside 0..{}", path_, i, count_ == 0 ? 0 : count_ - 1);
  return (*this)[i];
}

}  // namespace tapegrad::data
