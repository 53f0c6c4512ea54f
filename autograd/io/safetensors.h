// safetensors.h — reading and writing the safetensors format (huggingface.co/docs/safetensors).
//
//   auto tensors = load_safetensors("model.safetensors");            // every tensor, by name
//   SafetensorsFile f("ref.safetensors");                              // or: header once,
//   for (const auto& e : f.entries()) fmt::print("{} {} {}\n", e.name, e.dtype, e.shape);
//   Tensor w = f.load("weights.token_embeddings.weight");              // tensors one at a time
//   save_safetensors("out.safetensors", {{"w", w}}, {{"step", "10"}});  // atomic replace
//
// File layout: u64 little-endian N; N bytes of UTF-8 JSON
//   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}
// then the raw little-endian row-major data; offsets are relative to the start of the data section.
//
// dtypes (file → tapegrad on load):
//   F64 → float64, F32 → float32, I64 → int64, I32 → int32;
//   BOOL → bool (every byte must be 0 or 1);
//   U8   → bool when every byte is 0 or 1 (attention masks, e.g. the CS336 fixtures); a U8 tensor
//          holding any other value is refused (tapegrad has no uint8 dtype);
//   BF16 → bfloat16 (the bits as they are);
//   F16 → float32 (exact: every half value, incl. inf/nan/subnormals, is a float32).
//   Other dtypes of the spec (I8, I16, U16, U32, U64, F8_*) are listed by SafetensorsFile but
//   loading them throws; any other dtype string makes the header invalid.
// On save: float32 → F32, float64 → F64, bfloat16 → BF16, int32 → I32, int64 → I64, bool → BOOL.
//
// Everything read is validated (header size and JSON, entry fields and types, dtype, shape, offsets
// inside the data section without overlaps or gaps, byte size = numel × dtype size, duplicate keys);
// every problem throws tapegrad::Error naming the file, the tensor and what is wrong.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad {

// One tensor's header entry, as stored in the file.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;            // as in the file: "F32", "BF16", "U8", ...
  std::vector<int64_t> shape;   // [] for a 0-d tensor
  uint64_t begin = 0, end = 0;  // byte offsets relative to the data section
  int64_t numel() const;
};

// A safetensors file whose header has been read and validated; tensors load on demand.
// Each load() reopens the file, so a SafetensorsFile is cheap to keep and safe to share across threads.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // throws tapegrad::Error if the header is invalid

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // sorted by name
  std::vector<std::string> names() const;                                   // sorted
  bool contains(const std::string& name) const;
  const SafetensorsEntry& entry(const std::string& name) const;  // throws if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // A fresh contiguous CPU tensor (see the dtype table above); throws if absent or unloadable.
  Tensor load(const std::string& name) const;
  std::map<std::string, Tensor> load_all() const;
  // The raw bytes of a tensor of any dtype of the spec (e.g. the I8 values of an int8 model) into
  // `dst`: refused unless the entry's dtype is `dtype` and it holds exactly `nbytes` bytes.
  void read_bytes(const std::string& name, const std::string& dtype, void* dst, uint64_t nbytes) const;

 private:
  std::string path_;
  uint64_t data_start_ = 0;  // 8 + header length
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// A tensor given as raw bytes, for dtypes tapegrad has no Tensor for (int8 weights: "I8").
struct SafetensorsBytes {
  std::string dtype;           // a dtype of the spec: "I8", "F32", …
  std::vector<int64_t> shape;
  const void* data = nullptr;  // row-major, little-endian
  uint64_t nbytes = 0;         // numel × the dtype's size
};

// Every tensor of the file; `metadata`, when given, receives "__metadata__" (empty if absent).
std::map<std::string, Tensor> load_safetensors(const std::string& path,
                                               std::map<std::string, std::string>* metadata = nullptr);

// Writes the tensors (any layout, any device: written row-major from a CPU copy) and the metadata.
// Atomic: a temporary file in the same directory is written, flushed, fsync'ed and renamed over
// `path`; on any failure it is removed and an existing file at `path` is left untouched.
// Names and metadata must be valid UTF-8; no tensor may be named "__metadata__"; tensors must be defined.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// The same with tensors given as raw bytes too (names must differ from those of `tensors`).
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata,
                      const std::map<std::string, SafetensorsBytes>& raw);

}  // namespace tapegrad
