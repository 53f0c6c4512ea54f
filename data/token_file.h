// token_file.h — the on-disk token stream format, written streaming and read through a memory map.
//
// Layout (all little-endian), 32-byte header then the tokens:
//   offset  0  8 bytes  magic "TGTOKENS"
//   offset  8  uint32   version (1)
//   offset 12  uint32   token width in bytes: 2 (uint16) when vocab_size <= 65536, else 4 (uint32)
//   offset 16  uint64   token count
//   offset 24  uint64   vocab_size (every token is < vocab_size)
//   offset 32  count * width bytes of tokens
// The file size must be exactly 32 + count * width.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

namespace tapegrad::data {

inline constexpr char kTokenFileMagic[8] = {'T', 'G', 'T', 'O', 'K', 'E', 'N', 'S'};
inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr size_t kTokenFileHeaderBytes = 32;

// Appends tokens to a new file; the count in the header is filled in by close() (or the destructor,
// which swallows errors: call close() to see them).
class TokenFileWriter {
 public:
  TokenFileWriter(const std::string& path, uint64_t vocab_size);
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  void write(std::span<const uint32_t> tokens);  // throws on a token >= vocab_size
  void close();
  uint64_t count() const { return count_; }
  uint32_t token_width() const { return width_; }

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  uint64_t vocab_size_;
  uint32_t width_;
  uint64_t count_ = 0;
};

// Writes all of `tokens` to `path` in one go.
void write_token_file(const std::string& path, std::span<const uint32_t> tokens, uint64_t vocab_size);

// A token file mapped read-only; validates the header and the size on open.
class TokenFile {
 public:
  explicit TokenFile(const std::string& path);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  uint64_t size() const { return count_; }
  uint64_t vocab_size() const { return vocab_size_; }
  uint32_t token_width() const { return width_; }
  uint32_t operator[](uint64_t i) const;  // unchecked beyond a debug assert: callers check i < size()
  uint32_t at(uint64_t i) const;          // throws when i >= size()

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* tokens_ = nullptr;
  uint64_t count_ = 0, vocab_size_ = 0;
  uint32_t width_ = 0;
};

}  // namespace tapegrad::data
