// int8_ops.h — the int8 weight kernels (kernels/int8.h) on Tensors, for inference: a Linear or an
// embedding table whose weight is stored as int8 groups (nn::Linear::quantize_int8,
// nn::TransformerLM::quantize_int8, `tapegrad quantize`).
//
//   kernels::Int8Matrix w = kernels::quantize_int8(weight.data<float>(), out, in, 64);
//   Tensor y = int8_linear(x, w);       // x [..., in] float32 → [..., out] ≈ x Wᵀ
//   Tensor e = int8_embedding(ids, w);  // ids [...] → [..., in]: the rows, dequantized
//
// Neither records on the tape: there is no gradient through int8 weights (training from a quantized
// model is refused where it would start). Both need float32 CPU tensors.
#pragma once
#include "autograd/tensor.h"
#include "kernels/int8.h"

namespace tapegrad {

// From this many rows of x on, int8_linear dequantizes W to float32 and multiplies with sgemm (prefill,
// evaluation); below it, the int8 kernels (decoding: one row per token).
inline constexpr int64_t kInt8DequantizeRows = 32;

// x [..., K] float32 on the CPU, K = w.cols → [..., w.rows]. Throws when x would need a gradient.
Tensor int8_linear(const Tensor& x, const kernels::Int8Matrix& w);

// ids [...] int32/int64, each in [0, w.rows) → [..., w.cols] float32 (each row dequantized).
Tensor int8_embedding(const Tensor& ids, const kernels::Int8Matrix& w);

}  // namespace tapegrad
