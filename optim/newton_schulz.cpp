// newton_schulz.cpp — newton_schulz_orthogonalize(_many): grouping by shape, then one batched iteration per
// group (the iteration is written out in newton_schulz.h).
#include "optim/newton_schulz.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "kernels/error.h"

namespace tapegrad::optim {

namespace {

void check_matrix(const Tensor& G, int steps) {
  TG_CHECK(G.defined() && G.dim() == 2, "newton_schulz_orthogonalize: needs a 2-D matrix, but got shape {}",
           G.defined() ? fmt::format("{}", G.shape()) : std::string("(undefined)"));
  TG_CHECK(is_floating(G.dtype()), "newton_schulz_orthogonalize: needs a floating matrix, but got {}", G.dtype());
  TG_CHECK(steps >= 0 && steps < 100, "newton_schulz_orthogonalize: steps must be in [0, 100), but is {}", steps);
}

// The iteration on X [count, k, n] (k ≤ n), each matrix on its own; X in the work dtype.
Tensor iterate(Tensor X, const std::array<double, 3>& coefficients, int steps, double eps) {
  const auto [a, b, c] = coefficients;
  const DType work = X.dtype();
  // X / max(‖X‖_F, ε) per matrix, the norms [count, 1, 1] on X's device (nothing read by the host)
  const Tensor norm = sum(X * X, {1, 2}, /*keepdim=*/true).sqrt();
  X = X / where(lt(norm, eps), full(norm.shape(), eps, Options(work).device(X.device())), norm);
  // In bf16 the sums are formed in float32 from the bf16 products and rounded once, as torch's addmm
  // (b·A + c·A·A, a·X + B·X) rounds once: X, A and B are the bf16 values torch's iteration holds.
  const bool widen = work == kBFloat16;
  auto combine = [&](const Tensor& p, double alpha, const Tensor& q, double beta) {  // α·p + β·q, rounded once
    if (!widen) return beta == 1.0 ? p * alpha + q : p * alpha + q * beta;
    return (p.to(kFloat32) * alpha + q.to(kFloat32) * beta).to(work);
  };
  for (int k = 0; k < steps; ++k) {
    const Tensor A = matmul(X, transpose(X, 1, 2));   // X·Xᵀ          [count, k, k]
    const Tensor B = combine(A, b, matmul(A, A), c);  // b·A + c·A·A   [count, k, k]
    X = combine(X, a, matmul(B, X), 1.0);             // a·X + B·X     [count, k, n]
  }
  return X;
}

}  // namespace

Tensor newton_schulz_orthogonalize(const Tensor& G, const std::array<double, 3>& coefficients, int steps, double eps,
                                   std::optional<DType> dtype) {
  return newton_schulz_orthogonalize_many({G}, coefficients, steps, eps, dtype).front();
}

std::vector<Tensor> newton_schulz_orthogonalize_many(const std::vector<Tensor>& Gs,
                                                     const std::array<double, 3>& coefficients, int steps, double eps,
                                                     std::optional<DType> dtype) {
  for (const Tensor& G : Gs) check_matrix(G, steps);
  NoGradGuard no_grad;
  // Group the matrices by what they are iterated as: work shape [k, n] (a tall one transposed), dtype, device.
  struct Group {
    Shape shape;
    DType dtype;
    Device device;
    std::vector<size_t> members;
  };
  std::vector<Group> groups;
  auto oriented = [](const Tensor& G) { return G.shape()[0] > G.shape()[1]; };  // tall: work on Gᵀ
  for (size_t i = 0; i < Gs.size(); ++i) {
    const Tensor& G = Gs[i];
    const Shape s = oriented(G) ? Shape{G.shape()[1], G.shape()[0]} : G.shape();
    const DType work = dtype.value_or(G.dtype());
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.shape == s && g.dtype == work && g.device == G.device();
    });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{s, work, G.device(), {}});
    it->members.push_back(i);
  }
  std::vector<Tensor> out(Gs.size());
  for (const Group& g : groups) {
    std::vector<Tensor> stacked;
    for (size_t i : g.members) {
      const Tensor X = Gs[i].to(g.dtype);
      stacked.push_back(oriented(Gs[i]) ? transpose(X, 0, 1) : X);
    }
    const Tensor X = iterate(stack(stacked, 0), coefficients, steps, eps);  // [count, k, n]
    for (size_t j = 0; j < g.members.size(); ++j) {
      const size_t i = g.members[j];
      const Tensor O = select(X, 0, int64_t(j));
      out[i] = (oriented(Gs[i]) ? transpose(O, 0, 1) : O).contiguous();
    }
  }
  return out;
}

}  // namespace tapegrad::optim
