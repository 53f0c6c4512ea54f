// safetensors_dtype.h — internal to autograd/io: the safetensors dtype table and the
// half/bfloat16 → float32 conversions (exposed here so the tests can check them directly).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kernels/dtype.h"

namespace tapegrad::detail {

struct StDType {
  const char* name;  // as in the file: "F32"
  size_t size;       // bytes per element in the file
  bool loadable;     // tapegrad can load it
  DType as;          // the tapegrad dtype it loads as (when loadable)
};

// The entry for a dtype string of the spec, or nullptr for an unknown one.
const StDType* find_st_dtype(std::string_view name);

// Exact conversions (every half and bfloat16 value is a float32 value); NaN payloads are kept.
float half_to_float(uint16_t h);
float bfloat16_to_float(uint16_t b);

}  // namespace tapegrad::detail
