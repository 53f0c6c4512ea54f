// int8_ops.cpp — int8_linear and int8_embedding (see int8_ops.h).
#include "autograd/int8_ops.h"

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "kernels/error.h"

namespace tapegrad {

Tensor int8_linear(const Tensor& x, const kernels::Int8Matrix& w) {
  TG_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == w.cols,
           "int8_linear: input {} must end in {} (the int8 weight is [{}, {}])", x.defined() ? x.shape() : Shape{},
           w.cols, w.rows, w.cols);
  TG_CHECK(x.dtype() == kFloat32 && x.device() == kCPU, "int8_linear: input must be float32 on the CPU, got {} on {}",
           x.dtype(), x.device());
  TG_CHECK(!(GradMode::enabled() && x.requires_grad()),
           "int8_linear: int8 weights are for inference: no gradient flows through them (run under NoGradGuard)");
  const int64_t m = x.numel() / w.cols;
  if (m >= kInt8DequantizeRows) {
    // Many rows (a prefill, an evaluation batch): the weights dequantized once, then BLAS's sgemm. Dequantizing
    // costs rows·cols, the product m·rows·cols, and sgemm runs many rows far faster than a dot per row.
    Tensor wf = empty({w.rows, w.cols}, kFloat32);
    kernels::dequantize_int8(w, wf.data<float>());
    return matmul(x, wf.t());
  }
  const Tensor xc = x.contiguous();
  Shape out_shape = x.shape();
  out_shape[out_shape.size() - 1] = w.rows;
  Tensor y = empty(out_shape, kFloat32);
  kernels::int8_matmul(xc.data<float>(), m, w, y.data<float>(), kernels::int8_default_activations(),
                       kernels::int8_default_path());
  return y;
}

Tensor int8_embedding(const Tensor& ids, const kernels::Int8Matrix& w) {
  TG_CHECK(ids.defined() && (ids.dtype() == kInt64 || ids.dtype() == kInt32) && ids.device() == kCPU,
           "int8_embedding: ids must be int32 or int64 on the CPU");
  const Tensor c = ids.contiguous();
  Shape out_shape = ids.shape();
  out_shape.push_back(w.cols);
  Tensor out = empty(out_shape, kFloat32);
  const int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids.dtype() == kInt64 ? c.data<int64_t>()[i] : c.data<int32_t>()[i];
    TG_CHECK(id >= 0 && id < w.rows, "int8_embedding: id {} (position {}) is outside [0, {})", id, i, w.rows);
    kernels::dequantize_int8_row(w, id, out.data<float>() + i * w.cols);
  }
  return out;
}

}  // namespace tapegrad
