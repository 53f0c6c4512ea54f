// view.cpp — TensorView helpers and op names shared by every backend.
#include "kernels/backend.h"

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

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Log: return "log";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Rsqrt: return "rsqrt";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Sigmoid: return "sigmoid";
    case UnaryOp::Tanh: return "tanh";
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Silu: return "silu";
    case UnaryOp::Gelu: return "gelu";
    case UnaryOp::Pow: return "pow";
    case UnaryOp::AddScalar: return "add_scalar";
    case UnaryOp::MulScalar: return "mul_scalar";
  }
  return "?";
}

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Eq: return "eq";
    case BinaryOp::Ne: return "ne";
    case BinaryOp::Lt: return "lt";
    case BinaryOp::Le: return "le";
    case BinaryOp::Gt: return "gt";
    case BinaryOp::Ge: return "ge";
  }
  return "?";
}

}  // namespace tapegrad::kernels
