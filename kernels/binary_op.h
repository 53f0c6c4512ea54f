// binary_op.h — the enum BinaryOp, one value per row of the op table kernels/binary_ops.def, and
// is_comparison (the table's result column).
//
// kernels/backend.h declares the enum without its values (`enum class BinaryOp : uint8_t;`): only the
// files that name a value (BinaryOp::Add) or read the table include this header, so a new row
// recompiles them and not every file that includes backend.h.
#pragma once
#include <cstdint>

#include "kernels/backend.h"

namespace tapegrad::kernels {

// Add, Sub, Mul, Div, Eq, Ne, Lt, Le, Gt, Ge. Comparisons write a Bool output.
enum class BinaryOp : uint8_t {
#define TG_BINARY(Functor, name, result) Functor,
#include "kernels/binary_ops.def"
#undef TG_BINARY
};
inline constexpr int kBinaryOpCount = 0
#define TG_BINARY(Functor, name, result) +1
#include "kernels/binary_ops.def"
#undef TG_BINARY
    ;

// True for the comparisons (result column `bool`), whose output is Bool.
inline bool is_comparison(BinaryOp op) {
  constexpr bool kIsBool[] = {
#define TG_BINARY_RESULT_same false
#define TG_BINARY_RESULT_bool true
#define TG_BINARY(Functor, name, result) TG_BINARY_RESULT_##result,
#include "kernels/binary_ops.def"
#undef TG_BINARY
#undef TG_BINARY_RESULT_same
#undef TG_BINARY_RESULT_bool
  };
  static_assert(sizeof(kIsBool) == kBinaryOpCount, "one entry per row of kernels/binary_ops.def");
  return kIsBool[static_cast<int>(op)];
}

}  // namespace tapegrad::kernels
