// unary_op.h — the enum UnaryOp, one value per row of the op table kernels/unary_ops.def.
//
// Only the files that name a UnaryOp value (UnaryOp::Exp), switch over them or size an array by the
// table include this header; kernels/backend.h declares the enum without its values
// (`enum class UnaryOp : uint8_t;`), so a new row recompiles this header's readers, not every file
// that includes backend.h (docs/adding_an_op.md, "What a new row recompiles").
#pragma once
#include <cstdint>

#include "kernels/backend.h"

namespace tapegrad::kernels {

// Neg, Exp, …, Silu, Gelu, Pow, AddScalar, MulScalar. The param of Backend::unary is the scalar of
// Pow / AddScalar / MulScalar.
enum class UnaryOp : uint8_t {
#define TG_UNARY(Functor, name, reads, api) Functor,
#include "kernels/unary_ops.def"
#undef TG_UNARY
};
// How many rows unary_ops.def has; every array built from the table static_asserts its size against it.
inline constexpr int kUnaryOpCount = 0
#define TG_UNARY(Functor, name, reads, api) +1
#include "kernels/unary_ops.def"
#undef TG_UNARY
    ;

}  // namespace tapegrad::kernels
