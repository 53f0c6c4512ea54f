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
using detail::kview_as;

namespace {

Shape with_matrix(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows), batch.push_back(cols);
  return batch;
}

// The batched product of tensors with ≥ 2 dims. [..., M, K] @ [K, N] folds the batch into M (one big GEMM, and a
// 2-D gradient for B) without a tape entry of its own for the fold, so that the entry's input is `a` itself and
// its backward can add dA into the gradient gathered for `a` (below).
Tensor matmul_nd(const Tensor& a, const Tensor& b) {
  const int na = a.dim(), nb = b.dim();
  const int64_t M = a.shape()[na - 2], K = a.shape()[na - 1], K2 = b.shape()[nb - 2], N = b.shape()[nb - 1];
  TG_CHECK(K == K2, "matmul: inner dimensions differ: {} @ {} ({} vs {})", a.shape(), b.shape(), K, K2);
  const bool fold = nb == 2 && na > 2;
  // a2: a as the GEMM reads it — folded [rows, K] (a view when a's rows are contiguous, else a copy), or a itself.
  const Tensor a2 = fold ? a.detach().reshape({-1, K}) : a.detach();
  const int64_t rows = fold ? a2.shape()[0] : M;
  // The batch of the GEMM (empty when folded); out_shape is y's, a_shape/b_shape the operands broadcast to it.
  const Shape batch = fold ? Shape{}
                           : broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                              Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
  const Shape y_shape = with_matrix(batch, rows, N), a_shape = with_matrix(batch, rows, K);
  Shape out_shape = y_shape;
  if (fold) out_shape = a.shape(), out_shape[na - 1] = N;
  Tensor y = empty(out_shape, a.options());
  backend_of(a).matmul(kview_as(y, y_shape), kview(a2, a_shape), kview(b, with_matrix(batch, K, N)),
                       /*accumulate=*/false);
  // B stored column-major (a transposed view, e.g. the weight Wᵀ of y = x Wᵀ): its gradient is
  // computed as (Gᵀ A)ᵀ, so it comes out in B's memory order and reaches W contiguous, with no copy.
  const int64_t bs = b.strides()[nb - 2], bt = b.strides()[nb - 1];
  const bool b_column_major = K > 1 && N > 1 && bs == 1 && bt >= K;
  // dA has a's own shape (or its fold) unless a is broadcast over the batch; the engine then sums it to a's shape.
  const bool da_is_as_a = fold || a_shape == a.shape();
  if (needs_grad(a, b))
    record("matmul", {&a, &b}, y,
           [sa = SavedTensor(b.requires_grad() ? a2 : Tensor()), sb = SavedTensor(a.requires_grad() ? b : Tensor()),
            b_column_major, da_is_as_a, da_shape = fold ? a.shape() : a_shape, batch, a_shape, y_shape, N, K,
            dtype = a.dtype()](const Tensor& g, GradInputs& dx) {
             const Tensor g2 = g.reshape(y_shape);  // a view unless g is strided
             if (dx.needs(0)) {  // dA = G @ Bᵀ
               // The GEMM adds dA into the gradient gathered so far for a (beta = 1: no separate add pass) when
               // there is one. A bf16 a whose entry sums in float32 (several bf16 matmuls read it: attention's
               // q, k, v projections) gets dA in float32: no bf16 rounding, no widening pass.
               Tensor gathered = da_is_as_a ? dx.take_gathered(0) : Tensor();
               if (gathered.defined() && !gathered.is_contiguous()) gathered = gathered.contiguous();
               const DType da_dtype = gathered.defined()                               ? gathered.dtype()
                                      : dtype == kBFloat16 && dx.gathers_in_float32(0) ? kFloat32
                                                                                       : dtype;
               Tensor da = gathered.defined() ? gathered : empty(da_shape, Options(da_dtype).device(g.device()));
               backend_of(g).matmul(kview_as(da, a_shape), kview(g2),
                                    kview(sb.get().transpose(-2, -1), with_matrix(batch, N, K)), gathered.defined());
               dx[0] = da;
             }
             if (dx.needs(1)) {  // dB = Aᵀ @ G
               const Tensor& a_saved = sa.get();
               if (dtype == kBFloat16 && dx.gathers_in_float32(1)) {
                 // A bf16 cast of a float32 weight: dB in float32 from the GEMM's accumulators (not rounded to
                 // bf16 and widened after), in B's memory order as below.
                 const Options f32 = Options(kFloat32).device(g.device());
                 if (b_column_major) {  // dBᵀ = Gᵀ A
                   Tensor dbt = empty(with_matrix(batch, N, K), f32);
                   backend_of(g).matmul(kview(dbt), kview(g2.transpose(-2, -1)), kview(a_saved, a_shape), false);
                   dx[1] = dbt.transpose(-2, -1);
                 } else {
                   Tensor db = empty(with_matrix(batch, K, N), f32);
                   const Shape at_shape = with_matrix(batch, K, a_shape[a_shape.size() - 2]);
                   backend_of(g).matmul(kview(db), kview(a_saved.transpose(-2, -1), at_shape), kview(g2), false);
                   dx[1] = db;
                 }
               } else {
                 dx[1] = b_column_major ? matmul(g2.transpose(-2, -1), a_saved).transpose(-2, -1)
                                        : matmul(a_saved.transpose(-2, -1), g2);
               }
             }
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
