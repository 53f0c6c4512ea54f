// newton_schulz.cpp — newton_schulz_orthogonalize (the iteration is written out in newton_schulz.h).
#include "optim/newton_schulz.h"


#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "kernels/error.h"

namespace tapegrad::optim {

Tensor newton_schulz_orthogonalize(const Tensor& G, const std::array<double, 3>& coefficients, int steps, double eps,
                                   std::optional<DType> dtype) {
  TG_CHECK(G.defined() && G.dim() == 2, "newton_schulz_orthogonalize: needs a 2-D matrix, but got shape {}",
           G.defined() ? fmt::format("{}", G.shape()) : std::string("(undefined)"));
  TG_CHECK(is_floating(G.dtype()), "newton_schulz_orthogonalize: needs a floating matrix, but got {}", G.dtype());
  TG_CHECK(steps >= 0 && steps < 100, "newton_schulz_orthogonalize: steps must be in [0, 100), but is {}", steps);
  NoGradGuard no_grad;
  const auto [a, b, c] = coefficients;
  const bool tall = G.shape()[0] > G.shape()[1];  // m > n: work on Gᵀ so that X·Xᵀ is [n, n]
  const DType work = dtype.value_or(G.dtype());
  Tensor X = G.to(work);
  if (tall) X = transpose(X, 0, 1);
  // X / max(‖X‖_F, ε), the norm a 0-d tensor on X's device (nothing read by the host: no synchronisation)
  const Tensor norm = sum(X * X).sqrt();
  X = X / where(lt(norm, eps), full({}, eps, Options(work).device(X.device())), norm);
  // In bf16 the sums are formed in float32 from the bf16 products and rounded once, as torch's addmm
  // (b·A + c·A·A, a·X + B·X) rounds once: X, A and B are the bf16 values torch's iteration holds.
  const bool widen = work == kBFloat16;
  auto combine = [&](const Tensor& p, double alpha, const Tensor& q, double beta) {  // α·p + β·q, rounded once
    if (!widen) return beta == 1.0 ? p * alpha + q : p * alpha + q * beta;
    return (p.to(kFloat32) * alpha + q.to(kFloat32) * beta).to(work);
  };
  for (int k = 0; k < steps; ++k) {
    const Tensor A = matmul(X, transpose(X, 0, 1));   // X·Xᵀ          [k, k]
    const Tensor B = combine(A, b, matmul(A, A), c);  // b·A + c·A·A   [k, k]
    X = combine(X, a, matmul(B, X), 1.0);             // a·X + B·X     [k, n]
  }
  if (tall) X = transpose(X, 0, 1);
  return X.contiguous();
}

}  // namespace tapegrad::optim
