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

// The direct iteration (newton_schulz.h) on X [count, k, n], normalized, in the work dtype.
Tensor iterate_direct(Tensor X, const std::array<double, 3>& coefficients, int steps) {
  const auto [a, b, c] = coefficients;
  const DType work = X.dtype();
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

// The Gram form (newton_schulz.h) on X₀ [count, k, n], normalized: the loop on [k, k] matrices alone.
Tensor iterate_gram(const Tensor& X0, const std::array<double, 3>& coefficients, int steps) {
  const auto [a, b, c] = coefficients;
  const int64_t k = X0.size(1);
  Tensor A = matmul(X0, transpose(X0, 1, 2));  // A₀ = X₀·X₀ᵀ       [count, k, k]
  Tensor Q;                                    // Q = I until the first step
  for (int s = 0; s < steps; ++s) {
    const Tensor B = A * b + matmul(A, A) * c;  // P = a·I + B, B = b·A + c·A²
    if (Q.defined()) {
      Q = Q * a + matmul(B, Q);  // Q ← P·Q
    } else {
      const Tensor i = arange(0.0, double(k), 1.0, Options(kInt64).device(X0.device()));
      Q = B + eq(i.unsqueeze(1), i.unsqueeze(0)).to(X0.dtype()) * a;  // P·I
    }
    if (s + 1 < steps) {
      const Tensor PA = A * a + matmul(B, A);  // P·A
      A = PA * a + matmul(B, PA);              // A ← P·A·P (= P·P·A: polynomials in A₀ commute)
    }
  }
  return Q.defined() ? matmul(Q, X0) : X0;  // X = Q·X₀
}

bool use_gram(NewtonSchulzForm form, const Shape& work_shape, DType work) {
  if (form == NewtonSchulzForm::Direct) return false;
  if (form == NewtonSchulzForm::Gram) return true;
  // Auto: where it saves work (n > 1.5·k) and not in bfloat16, whose 8-bit mantissa the Gram matrix's squared
  // condition number would eat.
  return work != kBFloat16 && 2 * work_shape[1] > 3 * work_shape[0];
}

// The iteration on X [count, k, n] (k ≤ n), each matrix on its own; X in the work dtype.
Tensor iterate(Tensor X, const std::array<double, 3>& coefficients, int steps, double eps, bool gram) {
  const DType work = X.dtype();
  // X / max(‖X‖_F, ε) per matrix, the norms [count, 1, 1] on X's device (nothing read by the host)
  const Tensor norm = sum(X * X, {1, 2}, /*keepdim=*/true).sqrt();
  X = X / where(lt(norm, eps), full(norm.shape(), eps, Options(work).device(X.device())), norm);
  return gram ? iterate_gram(X, coefficients, steps) : iterate_direct(X, coefficients, steps);
}

}  // namespace

Tensor newton_schulz_orthogonalize(const Tensor& G, const std::array<double, 3>& coefficients, int steps, double eps,
                                   std::optional<DType> dtype, NewtonSchulzForm form) {
  return newton_schulz_orthogonalize_many({G}, coefficients, steps, eps, dtype, form).front();
}

std::vector<Tensor> newton_schulz_orthogonalize_many(const std::vector<Tensor>& Gs,
                                                     const std::array<double, 3>& coefficients, int steps, double eps,
                                                     std::optional<DType> dtype, NewtonSchulzForm form) {
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
    const Tensor X = iterate(stack(stacked, 0), coefficients, steps, eps, use_gram(form, g.shape, g.dtype));
    for (size_t j = 0; j < g.members.size(); ++j) {
      const size_t i = g.members[j];
      const Tensor O = select(X, 0, int64_t(j));
      out[i] = (oriented(Gs[i]) ? transpose(O, 0, 1) : O).contiguous();
    }
  }
  return out;
}

}  // namespace tapegrad::optim
