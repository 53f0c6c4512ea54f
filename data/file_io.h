// file_io.h — whole-file reads and atomic writes for the tokenizer files (vocab.json, merges.txt,
// tokenizer.json). Errors are tapegrad::Error messages that start with `who` and name the file.
#pragma once
#include <string>
#include <string_view>

namespace tapegrad::data {

// The bytes of the file; throws when it cannot be opened or read, or is a directory.
std::string read_whole_file(const std::string& path, std::string_view who);

// Writes `bytes` to `path + ".tmp"`, flushes it to disk and renames it over `path`: readers see the
// old file or the whole new one, never a part. On failure the temp file is removed and `path` is untouched.
void write_file_atomic(const std::string& path, std::string_view bytes, std::string_view who);

}  // namespace tapegrad::data
