// view.cpp — TensorView helpers and op names shared by every backend.
#include <iterator>

#include "kernels/backend.h"
#include "kernels/binary_op.h"
#include "kernels/unary_op.h"

namespace tapegrad::kernels {

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int d = shape.size() - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

// The name column of kernels/unary_ops.def and kernels/binary_ops.def, indexed by the enum.
const char* unary_op_name(UnaryOp op) {
  static constexpr const char* kNames[] = {
#define TG_UNARY(Functor, name, reads, api) #name,
#include "kernels/unary_ops.def"
#undef TG_UNARY
  };
  static_assert(std::size(kNames) == kUnaryOpCount, "one name per row of kernels/unary_ops.def");
  return kNames[static_cast<int>(op)];
}

const char* binary_op_name(BinaryOp op) {
  static constexpr const char* kNames[] = {
#define TG_BINARY(Functor, name, result) #name,
#include "kernels/binary_ops.def"
#undef TG_BINARY
  };
  static_assert(std::size(kNames) == kBinaryOpCount, "one name per row of kernels/binary_ops.def");
  return kNames[static_cast<int>(op)];
}

}  // namespace tapegrad::kernels
