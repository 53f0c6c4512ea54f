// op_util.h — helpers every op implementation uses (internal to autograd/).
#pragma once
#include "autograd/node.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace tapegrad::detail {

// The kernel-level view of a tensor (pointer already offset).
inline kernels::TensorView kview(const Tensor& t) {
  return {t.data_ptr(), t.dtype(), t.shape(), t.strides()};
}
// The kernel view of t broadcast to `shape` (stride 0 on broadcast dims).
inline kernels::TensorView kview(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return kview(t);
  return {t.data_ptr(), t.dtype(), shape, broadcast_strides(t.shape(), t.strides(), shape)};
}
// The same view with `shape` (a reshaped view of a contiguous tensor, e.g. keepdim of a reduction).
inline kernels::TensorView kview_as(const Tensor& t, const Shape& shape) {
  return {t.data_ptr(), t.dtype(), shape, contiguous_strides(shape)};
}
inline kernels::Backend& backend_of(const Tensor& t) { return t.storage()->backend(); }

inline void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  TG_CHECK(a.device() == b.device(), "{}: tensors are on different devices ({} and {})", op, a.device(), b.device());
}
inline void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  TG_CHECK(a.dtype() == b.dtype(), "{}: dtypes differ ({} {} vs {} {}); convert one with .to()", op, a.dtype(),
           a.shape(), b.dtype(), b.shape());
}
inline void check_floating(const char* op, const Tensor& t) {
  TG_CHECK(is_floating(t.dtype()), "{}: expected a float32, float64 or bfloat16 tensor, got {} {}", op, t.dtype(),
           t.shape());
}
// The dtype of a statistic an op keeps for its input dtype (a loss, RMSNorm's 1/rms, attention's
// log-sum-exp): float32 for bfloat16 inputs (8 bits of mantissa would blur them), else the input's.
inline DType statistic_dtype(DType t) { return t == DType::BFloat16 ? DType::Float32 : t; }
inline void check_defined(const char* op, const Tensor& t) {
  TG_CHECK(t.defined(), "{}: the tensor is undefined (default-constructed)", op);
}

// The sum of g over the dims that were broadcast from `shape`, reshaped to `shape`.
Tensor sum_to(const Tensor& g, const Shape& shape);

}  // namespace tapegrad::detail
