// ops_from_table.h — the autograd functions the op table declares: one `Tensor name(const Tensor& x)` per
// row of kernels/unary_ops.def whose api is `unary`: neg, exp, log, sqrt, rsqrt, abs, sigmoid, tanh,
// relu, silu, gelu (the exact erf form ½x(1 + erf(x/√2))), … Each op's formula and derivative are in
// kernels/unary_functors.h; the definitions, in autograd/ops/elementwise.cpp.
//
// Apart from autograd/ops.h so that a new row recompiles only the files that call these functions
// (and the table's other readers), not every file that includes ops.h: docs/adding_an_op.md,
// "What a new row recompiles". autograd/tapegrad.h includes it.
#pragma once
#include "autograd/tensor.h"

namespace tapegrad {

#define TG_UNARY_FUNCTION_unary(name) Tensor name(const Tensor& x);
#define TG_UNARY_FUNCTION_scalar(name)  // declared by hand in autograd/ops.h (pow, add, mul with a scalar)
#define TG_UNARY(Functor, name, reads, api) TG_UNARY_FUNCTION_##api(name)
#include "kernels/unary_ops.def"
#undef TG_UNARY
#undef TG_UNARY_FUNCTION_unary
#undef TG_UNARY_FUNCTION_scalar

}  // namespace tapegrad
