// fuzz_safetensors.cpp — libFuzzer target: the input is a .safetensors file (autograd/io/safetensors.h).
// Asserts: the reader throws only tapegrad::Error; every entry it lists lies inside the data section;
// a file that loads, saved again with save_safetensors and reloaded, gives the same tensors (dtype,
// shape, bytes) and the same metadata.
#include <cstring>
#include <map>
#include <string>

#include "autograd/io/safetensors.h"
#include "fuzz_common.h"
#include "kernels/error.h"

using namespace tapegrad;

namespace {

bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  const size_t bytes = size_t(ca.numel()) * dtype_size(ca.dtype());
  return bytes == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), bytes) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile input("safetensors");
  static fuzz::ScratchDir scratch;
  const std::string& path = input.set(fuzz::as_view(data, size));

  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
  try {
    const SafetensorsFile file(path);
    for (const SafetensorsEntry& e : file.entries()) {
      FUZZ_ASSERT(e.begin <= e.end && e.end <= size, "entry '" + e.name + "' lies outside the file");
      try {
        const Tensor t = file.load(e.name);  // an unsupported dtype or U8 > 1 may be refused
        FUZZ_ASSERT(t.numel() == e.numel(), "tensor '" + e.name + "' loaded with another element count");
      } catch (const Error&) {
      }
    }
    tensors = load_safetensors(path, &metadata);
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
    return 0;
  }
  // It loaded: the round trip through our writer must give back exactly the same.
  const std::string copy = scratch.file("copy.safetensors");
  try {
    save_safetensors(copy, tensors, metadata);
  } catch (const Error& e) {
    // The writer refuses names and metadata that are not valid UTF-8; the reader accepts only valid JSON
    // strings, so anything it loaded must be writable.
    fuzz::property_failed("save_safetensors(load_safetensors(x))", __FILE__, __LINE__, e.what());
  }
  std::map<std::string, std::string> metadata2;
  const std::map<std::string, Tensor> tensors2 = load_safetensors(copy, &metadata2);
  FUZZ_ASSERT(metadata2 == metadata, "metadata changed in the round trip");
  FUZZ_ASSERT(tensors2.size() == tensors.size(), "tensor count changed in the round trip");
  for (const auto& [name, t] : tensors) {
    const auto it = tensors2.find(name);
    FUZZ_ASSERT(it != tensors2.end(), "tensor '" + name + "' lost in the round trip");
    FUZZ_ASSERT(same_tensor(t, it->second), "tensor '" + name + "' changed in the round trip");
  }
  return 0;
}
