// 05_softmax_cross_entropy.cpp — chapter 5 of docs/learn: softmax, log-softmax and cross-entropy,
// step by step, and the fused kernel against the composition it replaces.
//
// Shapes: logits z [N,V] (N rows, V classes), targets y [N] int64.
//   softmax(z)_j     = exp(z_j − m) / Σ_k exp(z_k − m),   m = max_k z_k  (any m gives the same value;
//                                                          the max keeps exp from overflowing)
//   log_softmax(z)_j = z_j − m − log Σ_k exp(z_k − m)
//   L                = −(1/N) Σ_i log_softmax(z_i)_{y_i}
//   dL/dz_i          = (softmax(z_i) − onehot(y_i)) / N          [N,V]
//
// Exercise: mark one row "ignored" — set a target to -100 (ignore_index). The loss is then the mean
// over the other rows only, and the ignored row gets no gradient. Fix loss_by_hand and grad_by_hand
// until the verdict line says MATCH again.
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/tapegrad.h"
#include "nn/loss.h"

using namespace tapegrad;

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) { return (a - b).abs().max().item(); }

// A 1-D tensor as "[0.0900, 0.2447, 0.6652]"; every NaN as "nan" (C libraries differ on its sign).
std::string row(const Tensor& t) {
  std::string s;
  for (double v : t.to_vector<double>())
    s += (s.empty() ? "[" : ", ") + (std::isnan(v) ? std::string("nan") : fmt::format("{:.4f}", v));
  return s + "]";
}

// softmax over the last dim, written out: subtract the row max, exponentiate, normalise.
Tensor softmax_by_hand(const Tensor& z) {
  const Tensor m = z.max(-1, /*keepdim=*/true);  // [N,1]
  const Tensor e = (z - m).exp();                  // every exponent ≤ 0: no overflow
  return e / e.sum({-1}, /*keepdim=*/true);
}

// L = −(1/N) Σ_i log_softmax(z_i)_{y_i}, with log_softmax written out.
double loss_by_hand(const Tensor& z, const Tensor& y) {
  const Tensor m = z.max(-1, /*keepdim=*/true);
  const Tensor log_p = z - m - (z - m).exp().sum({-1}, /*keepdim=*/true).log();  // [N,V]
  const std::vector<int64_t> targets = y.to_vector<int64_t>();
  double sum = 0;
  for (size_t i = 0; i < targets.size(); ++i) sum -= log_p.select(0, int64_t(i)).select(0, targets[i]).item();
  return sum / double(targets.size());
}

// dL/dz for the mean cross-entropy: (softmax(z) − onehot(y)) / N.
Tensor grad_by_hand(const Tensor& z, const Tensor& y) {
  const int64_t N = z.size(0), V = z.size(1);
  const Tensor onehot = eq(arange(V).unsqueeze(0), y.unsqueeze(1)).to(z.dtype());  // [N,V]: 1 at y_i
  return (softmax_by_hand(z) - onehot) / double(N);
}

}  // namespace

int run() {
  Generator gen(5);
  const Options f64 = Options(kFloat64);

  // ---- 1. why subtract the max ----
  const Tensor big = tensor({1000, 1001, 1002}, f64);
  const Tensor naive = big.exp() / big.exp().sum();
  fmt::print("logits [1000, 1001, 1002]\n");
  fmt::print("  naive exp(z)/Σexp(z):  {}   (exp(1000) overflows to inf; inf/inf = nan)\n", row(naive));
  fmt::print("  with the max removed:  {}\n", row(softmax_by_hand(big)));
  fmt::print("  log_softmax:           {}\n\n", row(big.log_softmax(0)));

  // ---- 2. cross-entropy and its gradient, by hand and by backward ----
  const int64_t N = 4, V = 5;
  Tensor z = randn({N, V}, f64, &gen).requires_grad_();
  const Tensor y = from_vector<int64_t>({1, 0, 4, 2}, {N});
  Tensor loss = nn::cross_entropy(z, y);
  loss.backward();
  const double hand_loss = loss_by_hand(z.detach(), y);
  const Tensor hand_grad = grad_by_hand(z.detach(), y);
  fmt::print("cross-entropy, N {} V {}: loss by backward {:.9f}, by hand {:.9f}\n", N, V, loss.item(), hand_loss);
  fmt::print("dL/dz = (softmax(z) - onehot(y)) / N:\n{}\n", hand_grad);
  const double diff = max_abs_diff(hand_grad, z.grad());
  const bool match = std::abs(hand_loss - loss.item()) < 1e-12 && diff < 1e-12;
  fmt::print("{}: loss and gradient by hand {} backward's (max |gradient diff| {:.1e})\n\n",
             match ? "MATCH" : "MISMATCH", match ? "equal" : "differ from", diff);

  // ---- 3. the fused kernel against the composition (log_softmax + gather + mean), float32 and float64 ----
  fmt::print("{:<8} {:>10} {:>14} {:>14}\n", "dtype", "[N, V]", "|loss diff|", "max |grad diff|");
  for (DType dt : {kFloat64, kFloat32}) {
    const int64_t n = 64, v = 1000;
    Tensor logits = (3.0 * randn({n, v}, f64, &gen)).to(dt);
    const Tensor targets = randint(0, v, {n}, kInt64, &gen);
    Tensor a = logits.detach().requires_grad_(), b = logits.detach().requires_grad_();
    Tensor fused = nn::cross_entropy(a, targets), reference = nn::cross_entropy_reference(b, targets);
    fused.backward();
    reference.backward();
    fmt::print("{:<8} {:>10} {:>14.1e} {:>14.1e}\n", dtype_name(dt), fmt::format("[{}, {}]", n, v),
               std::abs(fused.item() - reference.item()), max_abs_diff(a.grad(), b.grad()));
  }
  return match ? 0 : 1;
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
