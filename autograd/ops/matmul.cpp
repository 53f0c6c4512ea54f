// matmul.cpp — matrix products: 1-D, 2-D and batched with broadcast batch dims.
//
//   Y[..., M, N] = A[..., M, K] @ B[..., K, N]
//   ∂L/∂A = G @ Bᵀ      ∂L/∂B = Aᵀ @ G      (then summed over broadcast batch dims by the engine)
// Transposes are views (swapped strides); the CPU backend hands them to BLAS as transpose
// flags, so neither forward nor backward copies a matrix.
#include "autograd/ops/op_util.h"

namespace tapegrad {

using detail::backend_of;
using detail::kview;

namespace {

// The batched product of tensors with ≥ 2 dims.
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  const int na = a.dim(), nb = b.dim();
  const int64_t M = a.shape()[na - 2], K = a.shape()[na - 1], K2 = b.shape()[nb - 2], N = b.shape()[nb - 1];
  TG_CHECK(K == K2, "matmul: inner dimensions differ: {} @ {} ({} vs {})", a.shape(), b.shape(), K, K2);
  // [..., M, K] @ [K, N]: fold the batch into M (one big GEMM, and a 2-D gradient for B).
  if (nb == 2 && na > 2) {
    Shape out = a.shape();
    out[na - 1] = N;
    return matmul_nd(a.reshape({-1, K}), b).reshape(out);
  }
  const Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                       Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
  Shape out_shape = batch, a_shape = batch, b_shape = batch;
  out_shape.push_back(M), out_shape.push_back(N);
  a_shape.push_back(M), a_shape.push_back(K);
  b_shape.push_back(K), b_shape.push_back(N);
  Tensor y = empty(out_shape, a.options());
  backend_of(a).matmul(kview(y), kview(a, a_shape), kview(b, b_shape), /*accumulate=*/false);
  // B stored column-major (a transposed view, e.g. the weight Wᵀ of y = x Wᵀ): its gradient is
  // computed as (Gᵀ A)ᵀ, so it comes out in B's memory order and reaches W contiguous, with no copy.
  const int64_t bs = b.strides()[nb - 2], bt = b.strides()[nb - 1];
  const bool b_column_major = K > 1 && N > 1 && bs == 1 && bt >= K;
  if (needs_grad(a, b))
    record("matmul", {&a, &b}, y,
           [sa = SavedTensor(b.requires_grad() ? a : Tensor()), sb = SavedTensor(a.requires_grad() ? b : Tensor()),
            b_column_major](const Tensor& g, GradInputs& dx) {
             if (dx.needs(0)) dx[0] = matmul(g, sb.get().transpose(-2, -1));  // G @ Bᵀ
             if (dx.needs(1))                                                 // Aᵀ @ G
               dx[1] = b_column_major ? matmul(g.transpose(-2, -1), sa.get()).transpose(-2, -1)
                                      : matmul(sa.get().transpose(-2, -1), g);
           });
  return y;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::check_defined("matmul", a);
  detail::check_defined("matmul", b);
  TG_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dim, got {} @ {}", a.shape(),
           b.shape());
  detail::check_same_device("matmul", a, b);
  detail::check_same_dtype("matmul", a, b);
  detail::check_floating("matmul", a);
  // 1-D operands, as NumPy: a vector on the left is a row [1, K], on the right a column [K, 1];
  // the added dim is removed from the result.
  if (a.dim() == 1 && b.dim() == 1) {
    TG_CHECK(a.shape()[0] == b.shape()[0], "matmul: inner dimensions differ: {} @ {} ({} vs {})", a.shape(),
             b.shape(), a.shape()[0], b.shape()[0]);
    return matmul_nd(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  }
  if (a.dim() == 1) {
    TG_CHECK(a.shape()[0] == b.shape()[b.dim() - 2], "matmul: inner dimensions differ: {} @ {} ({} vs {})",
             a.shape(), b.shape(), a.shape()[0], b.shape()[b.dim() - 2]);
    return matmul_nd(a.unsqueeze(0), b).squeeze(-2);
  }
  if (b.dim() == 1) {
    TG_CHECK(a.shape()[a.dim() - 1] == b.shape()[0], "matmul: inner dimensions differ: {} @ {} ({} vs {})",
             a.shape(), b.shape(), a.shape()[a.dim() - 1], b.shape()[0]);
    return matmul_nd(a, b.unsqueeze(1)).squeeze(-1);
  }
  return matmul_nd(a, b);
}

}  // namespace tapegrad
