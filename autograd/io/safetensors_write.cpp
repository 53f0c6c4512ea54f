// safetensors_write.cpp — the safetensors writer. Tensors are written row-major from contiguous
// CPU copies, largest element size first (then by name) so every tensor's data is aligned to its
// element size; the header is padded with spaces to a multiple of 8 bytes, as the reference does.
// The file appears atomically: temp file in the same directory → write → fsync → rename.
#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/io/atomic_file.h"
#include "autograd/io/safetensors.h"
#include "autograd/io/safetensors_dtype.h"
#include "kernels/error.h"

namespace tapegrad {

namespace {

const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int32: return "I32";
    case DType::Int64: return "I64";
    case DType::Bool: return "BOOL";
    case DType::BFloat16: return "BF16";
  }
  return "?";
}

struct Item {
  std::string name;
  std::string dtype;             // as in the file: "F32", "I8", …
  std::vector<int64_t> shape;
  size_t element_size;
  const void* bytes;             // nbytes of row-major data
  uint64_t nbytes;
  Tensor keep;                   // the contiguous CPU copy `bytes` points into (tensors only)
};

}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  save_safetensors(path, tensors, metadata, {});
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata,
                      const std::map<std::string, SafetensorsBytes>& raw) {
  std::vector<Item> items;
  for (const auto& [name, t] : tensors) {
    TG_CHECK(name != "__metadata__", "save_safetensors: '{}': a tensor cannot be named \"__metadata__\"", path);
    TG_CHECK(t.defined(), "save_safetensors: '{}': tensor '{}' is undefined", path, name);
    Tensor c = t.detach().to(kCPU).contiguous();
    const uint64_t nbytes = static_cast<uint64_t>(c.numel()) * dtype_size(c.dtype());
    items.push_back({name, st_dtype_name(c.dtype()), c.shape().vec(), dtype_size(c.dtype()), c.data_ptr(), nbytes, c});
  }
  for (const auto& [name, r] : raw) {
    TG_CHECK(name != "__metadata__", "save_safetensors: '{}': a tensor cannot be named \"__metadata__\"", path);
    TG_CHECK(!tensors.count(name), "save_safetensors: '{}': '{}' is given twice", path, name);
    const detail::StDType* info = detail::find_st_dtype(r.dtype);
    TG_CHECK(info != nullptr, "save_safetensors: '{}': tensor '{}': unknown dtype '{}'", path, name, r.dtype);
    uint64_t numel = 1;
    for (int64_t d : r.shape) {
      TG_CHECK(d >= 0, "save_safetensors: '{}': tensor '{}': negative dimension {}", path, name, d);
      numel *= static_cast<uint64_t>(d);
    }
    TG_CHECK(numel * info->size == r.nbytes, "save_safetensors: '{}': tensor '{}': {} bytes given for {} × {} bytes",
             path, name, r.nbytes, numel, info->size);
    items.push_back({name, r.dtype, r.shape, info->size, r.data, r.nbytes, Tensor()});
  }
  // Widest dtype first, then by name: every tensor stays aligned to its element size.
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.element_size != b.element_size ? a.element_size > b.element_size : a.name < b.name;
  });

  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const Item& it : items) {
    header[it.name] = {{"dtype", it.dtype},
                       {"shape", it.shape},
                       {"data_offsets", {offset, offset + it.nbytes}}};
    offset += it.nbytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // invalid UTF-8 in a name or metadata
    throw Error(fmt::format("save_safetensors: '{}': cannot encode the header: {}", path, e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  io::AtomicFile out(path, "safetensors");
  out.write(len, 8);
  out.write(text.data(), text.size());
  for (const Item& it : items)
    if (it.nbytes > 0) out.write(it.bytes, it.nbytes);
  out.commit();
}

}  // namespace tapegrad
