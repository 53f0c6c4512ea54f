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

// Each requested output (data != nullptr) of an RMSNorm backward like its input, in x's dtype.
inline void check_rms_norm_grad_outputs(const char* op, const TensorView& grad_x, const TensorView& grad_weight,
                                        const TensorView& x, const TensorView& weight) {
  if (grad_x.data != nullptr)
    TG_CHECK(grad_x.shape == x.shape && grad_x.dtype == x.dtype, "{}: grad_x {} {} must match x {} {}", op,
             grad_x.dtype, grad_x.shape, x.dtype, x.shape);
  if (grad_weight.data != nullptr)
    TG_CHECK(grad_weight.shape == weight.shape && grad_weight.dtype == x.dtype,
             "{}: grad_weight {} {} must match weight {} {}", op, grad_weight.dtype, grad_weight.shape, weight.dtype,
             weight.shape);
}

// The forward's checks, grad_y like x, and each requested output (data != nullptr) like its input.
inline void check_rms_norm_backward_args(const char* op, const TensorView& grad_x, const TensorView& grad_weight,
                                         const TensorView& grad_y, const TensorView& x, const TensorView& weight,
                                         const TensorView& rstd) {
  check_rms_norm_args(op, x, weight, rstd);
  TG_CHECK(grad_y.shape == x.shape && grad_y.dtype == x.dtype, "{}: grad_y {} {} must match x {} {}", op,
           grad_y.dtype, grad_y.shape, x.dtype, x.shape);
  check_rms_norm_grad_outputs(op, grad_x, grad_weight, x, weight);
}

// t is x's dtype, or bfloat16 next to float32 x (the mixed-precision residual stream).
inline bool same_or_bf16_of_f32(DType t, DType x) {
  return t == x || (t == DType::BFloat16 && x == DType::Float32);
}

// add_rms_norm: x [R, C]; h like x; branch and y of x's shape in x's dtype or (float32 x) bfloat16; weight [C] in x's
// dtype; rstd [R] in rms_norm's statistic dtype (float32 for bfloat16 x, else x's).
inline void check_add_rms_norm_args(const char* op, const TensorView& h, const TensorView& y, const TensorView& rstd,
                                    const TensorView& x, const TensorView& branch, const TensorView& weight) {
  const DType statistic = x.dtype == DType::BFloat16 ? DType::Float32 : x.dtype;
  TG_CHECK(x.ndim() == 2, "{}: x must be [R, C], got {}", op, x.shape);
  TG_CHECK(h.shape == x.shape && h.dtype == x.dtype, "{}: h {} {} must match x {} {}", op, h.dtype, h.shape, x.dtype,
           x.shape);
  TG_CHECK(branch.shape == x.shape && same_or_bf16_of_f32(branch.dtype, x.dtype),
           "{}: branch {} {} must have x's shape {} in x's dtype {} (or bfloat16 for float32 x)", op, branch.dtype,
           branch.shape, x.shape, x.dtype);
  TG_CHECK(y.shape == x.shape && same_or_bf16_of_f32(y.dtype, x.dtype),
           "{}: y {} {} must have x's shape {} in x's dtype {} (or bfloat16 for float32 x)", op, y.dtype, y.shape,
           x.shape, x.dtype);
  TG_CHECK(weight.ndim() == 1 && weight.shape[0] == x.shape[1] && weight.dtype == x.dtype,
           "{}: weight {} {} must be [C] = [{}] of x's dtype {}", op, weight.dtype, weight.shape, x.shape[1], x.dtype);
  TG_CHECK(rstd.ndim() == 1 && rstd.shape[0] == x.shape[0] && rstd.dtype == statistic,
           "{}: rstd {} {} must be [R] = [{}] of dtype {}", op, rstd.dtype, rstd.shape, x.shape[0], statistic);
}

// rms_norm_backward_add: as rms_norm_backward's (rstd as above), except that grad_y may be bfloat16, and
// grad_residual (when present) has x's shape and dtype and is grad_x itself or does not overlap it.
inline void check_rms_norm_backward_add_args(const char* op, const TensorView& grad_x, const TensorView& grad_weight,
                                             const TensorView& grad_y, const TensorView& x, const TensorView& weight,
                                             const TensorView& rstd, const TensorView& grad_residual) {
  const DType statistic = x.dtype == DType::BFloat16 ? DType::Float32 : x.dtype;
  TG_CHECK(x.ndim() == 2, "{}: x must be [R, C], got {}", op, x.shape);
  TG_CHECK(weight.ndim() == 1 && weight.shape[0] == x.shape[1] && weight.dtype == x.dtype,
           "{}: weight {} {} must be [C] = [{}] of x's dtype {}", op, weight.dtype, weight.shape, x.shape[1], x.dtype);
  TG_CHECK(rstd.ndim() == 1 && rstd.shape[0] == x.shape[0] && rstd.dtype == statistic,
           "{}: rstd {} {} must be [R] = [{}] of dtype {}", op, rstd.dtype, rstd.shape, x.shape[0], statistic);
  TG_CHECK(grad_y.shape == x.shape && same_or_bf16_of_f32(grad_y.dtype, x.dtype),
           "{}: grad_y {} {} must have x's shape {} in x's dtype {} (or bfloat16 for float32 x)", op, grad_y.dtype,
           grad_y.shape, x.shape, x.dtype);
  check_rms_norm_grad_outputs(op, grad_x, grad_weight, x, weight);
  if (grad_residual.data != nullptr) {
    TG_CHECK(grad_x.data != nullptr, "{}: grad_residual is given but grad_x is not computed", op);
    TG_CHECK(grad_residual.shape == x.shape && grad_residual.dtype == x.dtype,
             "{}: grad_residual {} {} must match x {} {}", op, grad_residual.dtype, grad_residual.shape, x.dtype,
             x.shape);
    TG_CHECK(grad_residual.data != grad_x.data || grad_residual.strides == grad_x.strides,
             "{}: grad_residual is grad_x's buffer at other strides {} vs {}", op, grad_residual.strides,
             grad_x.strides);
  }
}

// `name` (v) has the shape and dtype of the SwiGLU input a.
inline void check_same_as_a(const char* op, const char* name, const TensorView& v, const TensorView& a) {
  TG_CHECK(v.shape == a.shape && v.dtype == a.dtype, "{}: {} {} {} must match a {} {}", op, name, v.dtype, v.shape,
           a.dtype, a.shape);
}

}  // namespace tapegrad::kernels
