// 04_shapes.cpp — chapter 4 of docs/learn: shapes in the backward pass.
//
// 1. Broadcasting: c = a + b with a [3,1], b [1,4] → c [3,4]. In the forward, a's one column is
//    reused 4 times and b's one row 3 times; so in the backward each use sends back a gradient, and
//    they add up: dL/da = Σ over the broadcast dims of dL/dc, kept as a's shape. tapegrad does this
//    in one place, the engine (detail::sum_to in autograd/engine.cpp): every op's backward returns a
//    gradient of its *output's* shape, and the engine sums it down to each input's shape.
// 2. The same rule, written here by hand (undo_broadcast), checked against backward for several
//    pairs of shapes.
// 3. Matmul: C = A B, with G = dL/dC:  dA = G Bᵀ,  dB = Aᵀ G.
//      2-D:      A [M,K]  B [K,N]  C, G [M,N]   dA [M,N]·[N,K] = [M,K]   dB [K,M]·[M,N] = [K,N]
//      batched:  A [S,M,K] B [S,K,N]: the same per batch element s.
//      B shared: A [S,M,K] B [K,N]: B is broadcast over S, so dB = Σ_s A_sᵀ G_s (sum_to again).
//
// Exercise: add a pair of shapes to `pairs` below (say {2,1,4} and {3,1}); predict the shapes of
// dL/da and dL/db before running. Or rewrite undo_broadcast yourself: each row must say MATCH.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "autograd/node.h"
#include "autograd/tapegrad.h"

using namespace tapegrad;

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) { return (a - b).abs().max().item(); }

// Sum g (the broadcast shape) down to `shape`: sum away the leading dims that `shape` lacks, and
// every dim where `shape` has size 1 but g does not.
Tensor undo_broadcast(const Tensor& g, const Shape& shape) {
  const int lead = g.dim() - shape.size();
  std::vector<int64_t> dims;
  for (int d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)) dims.push_back(d);
  return (dims.empty() ? g : g.sum(dims, /*keepdim=*/true)).reshape(shape);
}

}  // namespace

int run() {
  Generator gen(4);
  const Options f64 = Options(kFloat64);
  bool all_match = true;
  auto verdict = [&](double diff) {
    all_match = all_match && diff < 1e-12;
    return diff < 1e-12 ? "MATCH" : "MISMATCH";
  };

  // ---- 1. a [3,1] + b [1,4] ----
  {
    RetainValuesGuard keep;  // so we can look at the gradient the add entry received
    Tensor a = tensor({1, 2, 3}, {3, 1}, Options(f64).requires_grad());
    Tensor b = tensor({10, 20, 30, 40}, {1, 4}, Options(f64).requires_grad());
    Tensor c = a + b;
    // L = Σ c ⊙ W with a fixed W, so dL/dc = W: every element of c gets its own gradient.
    const Tensor W = tensor({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 2}, {3, 4}, f64);
    Tensor L = (c * W).sum();
    L.backward();
    fmt::print("a {} + b {} = c {}\n{}\n", a.shape(), b.shape(), c.shape(), c);
    fmt::print("dL/dc = W, the gradient the add entry received: {}\n{}\n", c.grad_fn()->retained_grad().shape(),
               c.grad_fn()->retained_grad());
    fmt::print("dL/da {} = W summed over dim 1:\n{}\n", a.grad().shape(), a.grad());
    fmt::print("dL/db {} = W summed over dim 0:\n{}\n\n", b.grad().shape(), b.grad());
  }

  // ---- 2. the rule by hand, for several pairs of shapes ----
  const std::vector<std::pair<Shape, Shape>> pairs = {{{3, 1}, {1, 4}}, {{3, 4}, {4}}, {{2, 3, 4}, {3, 1}}};
  for (const auto& [sa, sb] : pairs) {
    Tensor a = randn(sa, f64, &gen).requires_grad_(), b = randn(sb, f64, &gen).requires_grad_();
    Tensor c = a + b;
    const Tensor W = randn(c.shape(), f64, &gen);
    (c * W).sum().backward();
    const double diff =
        std::max(max_abs_diff(undo_broadcast(W, sa), a.grad()), max_abs_diff(undo_broadcast(W, sb), b.grad()));
    fmt::print("{:<10} + {:<10} -> {:<10} dL/da {:<10} dL/db {:<10} {}\n", fmt::format("{}", sa), fmt::format("{}", sb),
               fmt::format("{}", c.shape()), fmt::format("{}", a.grad().shape()), fmt::format("{}", b.grad().shape()),
               verdict(diff));
  }
  fmt::print("\n");

  // ---- 3. matmul gradients: dA = G Bᵀ, dB = Aᵀ G ----
  struct Case { const char* what; Shape a, b; };
  for (const Case& k : {Case{"2-D", {2, 3}, {3, 4}}, Case{"batched", {5, 2, 3}, {5, 3, 4}},
                        Case{"B shared", {5, 2, 3}, {3, 4}}}) {
    Tensor A = randn(k.a, f64, &gen).requires_grad_(), B = randn(k.b, f64, &gen).requires_grad_();
    Tensor C = matmul(A, B);
    const Tensor G = randn(C.shape(), f64, &gen);  // dL/dC for L = Σ C ⊙ G
    (C * G).sum().backward();
    NoGradGuard no_grad;
    const Tensor dA = matmul(G, B.transpose(-1, -2));                   // [.., M, N]·[.., N, K]
    const Tensor dB = undo_broadcast(matmul(A.transpose(-1, -2), G), B.shape());  // [.., K, M]·[.., M, N]
    const double diff = std::max(max_abs_diff(dA, A.grad()), max_abs_diff(dB, B.grad()));
    fmt::print("{:<9} A {:<10} B {:<10} C {:<10} dA {:<10} dB {:<10} {}\n", k.what, fmt::format("{}", k.a),
               fmt::format("{}", k.b), fmt::format("{}", C.shape()), fmt::format("{}", A.grad().shape()),
               fmt::format("{}", B.grad().shape()), verdict(diff));
  }
  fmt::print("{}\n", all_match ? "all MATCH" : "some MISMATCH");
  return all_match ? 0 : 1;
}

// An error (a shape that does not fit, say, after an edit) is printed as one line, not a crash.
int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
