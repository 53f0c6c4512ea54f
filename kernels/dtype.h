// dtype.h — element types and devices. float32 is the default; float64 exists on every
// differentiable CPU op (gradcheck needs it); bfloat16 is a storage type (kernels/bfloat16.h: every op
// computes in float32 and rounds back, kernels/bf16_bridge.h); int64/int32 hold indices; bool holds masks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace tapegrad {

enum class DType : uint8_t { Float32, Float64, Int32, Int64, Bool, BFloat16 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
    case DType::BFloat16: return 2;
  }
  return 0;
}
constexpr bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64 || t == DType::BFloat16; }
constexpr bool is_index(DType t) { return t == DType::Int32 || t == DType::Int64; }
const char* dtype_name(DType t);  // "float32", "bfloat16", ...

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  // Written out (not `= default`): this header is also compiled as C++17 by nvcc (kernels/cuda/).
  friend bool operator==(const Device& a, const Device& b) { return a.type == b.type && a.index == b.index; }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
  std::string str() const;  // "cpu", "cuda:0"
};

// Parses "cpu", "cuda", "cuda:1"; throws on anything else.
Device parse_device(const std::string& s);

}  // namespace tapegrad

template <>
struct fmt::formatter<tapegrad::DType> : fmt::formatter<const char*> {
  auto format(tapegrad::DType t, format_context& ctx) const {
    return fmt::formatter<const char*>::format(tapegrad::dtype_name(t), ctx);
  }
};
template <>
struct fmt::formatter<tapegrad::Device> : fmt::formatter<std::string> {
  auto format(const tapegrad::Device& d, format_context& ctx) const {
    return fmt::formatter<std::string>::format(d.str(), ctx);
  }
};
