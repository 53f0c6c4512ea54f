// dispatch.h — calls a generic lambda with a value of the C++ type behind a DType.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/bfloat16.h"
#include "kernels/dtype.h"
#include "kernels/error.h"

namespace tapegrad::kernels::cpu {

// Float32/Float64 only; other dtypes throw naming `op`.
template <class F>
void dispatch_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    default: throw Error(fmt::format("{}: dtype {} is not supported (float32 or float64 expected)", op, t));
  }
}

// Every dtype that kernels compute in; Bool is visited as bool. BFloat16 is not one of them: the bf16
// bridge (kernels/bf16_bridge.h) hands kernels float32 copies, so a bfloat16 view here is a bug.
template <class F>
void dispatch_all(DType t, F&& f) {
  switch (t) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Bool: return f(bool{});
    case DType::BFloat16: break;
  }
  throw Error("internal: a bfloat16 view reached a float32 kernel past the bf16 bridge (kernels/bf16_bridge.h)");
}

// Every dtype including BFloat16 (visited as tapegrad::bfloat16): for fill and copy, the two kernels
// that store bfloat16 themselves (copy is how the bridge converts).
template <class F>
void dispatch_storage(DType t, F&& f) {
  if (t == DType::BFloat16) return f(bfloat16{});
  dispatch_all(t, static_cast<F&&>(f));
}

// Float32, Float64 and BFloat16 (visited as tapegrad::bfloat16), for the GPU kernels that store bfloat16
// themselves (Backend::native_bf16) and compute in compute_t<T>; other dtypes throw naming `op`.
template <class F>
void dispatch_floating_storage(DType t, const char* op, F&& f) {
  if (t == DType::BFloat16) return f(bfloat16{});
  dispatch_floating(t, op, static_cast<F&&>(f));
}
// The type a kernel computes in for storage type T: float32 for bfloat16, T itself otherwise.
template <class T> struct ComputeType { using type = T; };
template <> struct ComputeType<bfloat16> { using type = float; };
template <class T> using compute_t = typename ComputeType<T>::type;

// A fill value (a double) as element type T: nonzero → true for Bool, else a static_cast. Shared by
// the CPU and CUDA fill.
template <class T>
T cast_scalar(double v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0.0;
  else if constexpr (std::is_same_v<T, bfloat16>) return bfloat16(static_cast<float>(v));
  else return static_cast<T>(v);
}

// The accumulator of a sum: double for floats, int64 for integers.
template <class T> struct Accum { using type = double; };
template <> struct Accum<int32_t> { using type = int64_t; };
template <> struct Accum<int64_t> { using type = int64_t; };
template <> struct Accum<bool> { using type = int64_t; };

// Reads index i of an Int32/Int64 index array.
inline int64_t read_index(const void* data, DType t, int64_t byte_offset) {
  const char* p = static_cast<const char*>(data) + byte_offset;
  return t == DType::Int64 ? *reinterpret_cast<const int64_t*>(p) : *reinterpret_cast<const int32_t*>(p);
}

}  // namespace tapegrad::kernels::cpu
