// fused_args.h — the argument checks of the fused RMSNorm and SwiGLU kernels, shared by the CPU and
// CUDA backends so both refuse the same inputs with the same messages (host code only).
#pragma once
#include "kernels/backend.h"

namespace tapegrad::kernels {

// x [R, C], weight [C], rstd [R], all of x's dtype.
inline void check_rms_norm_args(const char* op, const TensorView& x, const TensorView& weight, const TensorView& rstd) {
  TG_CHECK(x.ndim() == 2, "{}: x must be [R, C], got {}", op, x.shape);
  TG_CHECK(weight.ndim() == 1 && weight.shape[0] == x.shape[1] && weight.dtype == x.dtype,
           "{}: weight {} {} must be [C] = [{}] of x's dtype {}", op, weight.dtype, weight.shape, x.shape[1], x.dtype);
  TG_CHECK(rstd.ndim() == 1 && rstd.shape[0] == x.shape[0] && rstd.dtype == x.dtype,
           "{}: rstd {} {} must be [R] = [{}] of x's dtype", op, rstd.dtype, rstd.shape, x.shape[0]);
}

// The forward's checks, grad_y like x, and each requested output (data != nullptr) like its input.
inline void check_rms_norm_backward_args(const char* op, const TensorView& grad_x, const TensorView& grad_weight,
                                         const TensorView& grad_y, const TensorView& x, const TensorView& weight,
                                         const TensorView& rstd) {
  check_rms_norm_args(op, x, weight, rstd);
  TG_CHECK(grad_y.shape == x.shape && grad_y.dtype == x.dtype, "{}: grad_y {} {} must match x {} {}", op,
           grad_y.dtype, grad_y.shape, x.dtype, x.shape);
  if (grad_x.data != nullptr)
    TG_CHECK(grad_x.shape == x.shape && grad_x.dtype == x.dtype, "{}: grad_x {} {} must match x {} {}", op,
             grad_x.dtype, grad_x.shape, x.dtype, x.shape);
  if (grad_weight.data != nullptr)
    TG_CHECK(grad_weight.shape == weight.shape && grad_weight.dtype == x.dtype,
             "{}: grad_weight {} {} must match weight {} {}", op, grad_weight.dtype, grad_weight.shape, weight.dtype,
             weight.shape);
}

// `name` (v) has the shape and dtype of the SwiGLU input a.
inline void check_same_as_a(const char* op, const char* name, const TensorView& v, const TensorView& a) {
  TG_CHECK(v.shape == a.shape && v.dtype == a.dtype, "{}: {} {} {} must match a {} {}", op, name, v.dtype, v.shape,
           a.dtype, a.shape);
}

}  // namespace tapegrad::kernels
