// 03_mlp.cpp — chapter 3 of docs/learn: a neuron, then a two-layer MLP, with the backward written
// by hand in matrices and compared with loss.backward() and with gradcheck.
//
// Shapes: N examples, D inputs, H hidden units. All float64.
//   neuron:  ŷ = tanh(X w + b)                      X [N,D]  w [D,1]  b [1]        ŷ [N,1]
//   MLP:     A = X W1 + b1,  Hid = tanh(A)          W1 [D,H]  b1 [H]              A, Hid [N,H]
//            ŷ = Hid W2 + b2                        W2 [H,1]  b2 [1]              ŷ [N,1]
//   loss:    L = (1/N) Σ (ŷ − y)²                   y [N,1]                       L 0-d
//
// Exercise: delete the body of second_layer_backward and write it again from the formulas in its
// comment; the program prints MATCH when your gradients equal backward()'s. A second MATCH line says
// that the forward lambda (gradcheck's and the training loop's) computes the same loss.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "autograd/tapegrad.h"

using namespace tapegrad;

namespace {

constexpr int64_t N = 8, D = 3, H = 4;

Tensor mse(const Tensor& y_hat, const Tensor& y) { return ((y_hat - y) * (y_hat - y)).mean(); }

double max_abs_diff(const Tensor& a, const Tensor& b) { return (a - b).abs().max().item(); }

struct SecondLayerGrads { Tensor dW2, db2, dHid; };

// The output layer ŷ = Hid W2 + b2, backwards. Given dŶ = dL/dŷ [N,1]:
//   dW2  = Hidᵀ dŶ        [H,N]·[N,1] = [H,1]   (each weight sums its contribution over the N rows)
//   db2  = Σ_rows dŶ      [1]                   (b2 was broadcast over the rows, so its gradient sums them)
//   dHid = dŶ W2ᵀ         [N,1]·[1,H] = [N,H]
SecondLayerGrads second_layer_backward(const Tensor& Hid, const Tensor& W2, const Tensor& dY) {
  return {matmul(Hid.t(), dY), dY.sum({0}), matmul(dY, W2.t())};
}

}  // namespace

int run() {
  Generator gen(3);
  const Options f64 = Options(kFloat64);
  const Tensor X = randn({N, D}, f64, &gen);
  // The target: y = x0·x1 − 0.5·x2, a smooth function the MLP can fit.
  const Tensor y = (X.select(1, 0) * X.select(1, 1) - 0.5 * X.select(1, 2)).unsqueeze(1);

  // ---- 1. one neuron: dL/dw = Xᵀ G, dL/db = Σ G, with G = dL/dŷ ⊙ (1 − ŷ²) and dL/dŷ = 2(ŷ − y)/N ----
  {
    Tensor w = randn({D, 1}, f64, &gen).requires_grad_(), b = zeros({1}, Options(f64).requires_grad());
    Tensor y_hat = tanh(matmul(X, w) + b);
    mse(y_hat, y).backward();
    NoGradGuard no_grad;
    const Tensor G = (2.0 / N) * (y_hat - y) * (1.0 - y_hat * y_hat);  // [N,1]
    fmt::print("neuron: dL/dw by backward {}\n", w.grad().t());
    fmt::print("neuron: dL/dw by hand     {}\n", matmul(X.t(), G).t());
    fmt::print("neuron: max |difference| w {:.1e}  b {:.1e}\n\n", max_abs_diff(w.grad(), matmul(X.t(), G)),
               max_abs_diff(b.grad(), G.sum({0})));
  }

  // ---- 2. the MLP: forward on the tape, backward by hand, backward by the tape ----
  Tensor W1 = (randn({D, H}, f64, &gen) / std::sqrt(double(D))).requires_grad_();
  Tensor b1 = zeros({H}, Options(f64).requires_grad());
  Tensor W2 = (randn({H, 1}, f64, &gen) / std::sqrt(double(H))).requires_grad_();
  Tensor b2 = zeros({1}, Options(f64).requires_grad());
  auto forward = [&](const Tensor& x, const Tensor& w1, const Tensor& c1, const Tensor& w2, const Tensor& c2) {
    return matmul(tanh(matmul(x, w1) + c1), w2) + c2;
  };

  Tensor Hid = tanh(matmul(X, W1) + b1);  // kept: the hand backward needs it
  Tensor y_hat = matmul(Hid, W2) + b2;
  Tensor loss = mse(y_hat, y);
  loss.backward();

  // The hand backward computes with tensors too, under NoGradGuard so that it records nothing.
  Tensor dW1, db1, dW2, db2;
  {
    NoGradGuard no_grad;
    const Tensor dY = (2.0 / N) * (y_hat - y);            // dL/dŷ              [N,1]
    SecondLayerGrads second = second_layer_backward(Hid, W2, dY);
    dW2 = second.dW2, db2 = second.db2;
    const Tensor dA = second.dHid * (1.0 - Hid * Hid);    // tanh' = 1 − tanh²  [N,H]
    dW1 = matmul(X.t(), dA);                              // [D,N]·[N,H] = [D,H]
    db1 = dA.sum({0});                                    // [H]
  }

  fmt::print("MLP loss {:.6f}\n", loss.item());
  fmt::print("{:<4} {:>8} {:>22}\n", "", "shape", "max |hand − backward|");
  double worst = 0;
  for (auto [name, hand, param] : {std::tuple{"W1", dW1, W1}, {"b1", db1, b1}, {"W2", dW2, W2}, {"b2", db2, b2}}) {
    const double d = max_abs_diff(hand, param.grad());
    worst = std::max(worst, d);
    fmt::print("{:<4} {:>8} {:>22.1e}\n", name, fmt::format("{}", hand.shape()), d);
  }
  const bool match = worst < 1e-12;
  fmt::print("{}: the hand-written backward {} loss.backward()\n", match ? "MATCH" : "MISMATCH",
             match ? "equals" : "differs from");

  // The forward lambda (used by gradcheck and the training loop) must compute the same loss as the
  // lines above: an activation changed in one place but not the other shows here, not in gradcheck.
  double forward_loss = 0;
  {
    NoGradGuard no_grad;
    forward_loss = mse(forward(X, W1, b1, W2, b2), y).item();
  }
  const bool same_forward = std::abs(forward_loss - loss.item()) <= 1e-12 * (1 + std::abs(loss.item()));
  if (same_forward)
    fmt::print("MATCH: the forward lambda gives the same loss\n");
  else
    fmt::print("MISMATCH: the forward lambda gives loss {:.6f}, the lines above {:.6f} "
               "(the same activation in both?)\n", forward_loss, loss.item());

  // gradcheck: backward against central finite differences for every element of every parameter.
  auto mlp_loss = [&](const std::vector<Tensor>& p) { return mse(forward(X, p[0], p[1], p[2], p[3]), y); };
  const GradcheckResult check = gradcheck(mlp_loss, {W1.detach().requires_grad_(), b1.detach().requires_grad_(),
                                                     W2.detach().requires_grad_(), b2.detach().requires_grad_()});
  fmt::print("gradcheck: {}\n\n", check.ok ? "ok (backward equals the finite differences)" : check.message);

  // ---- 3. a few steps of gradient descent: θ ← θ − lr·dL/dθ, with the tape's gradients ----
  const double lr = 0.2;
  for (int step = 0; step <= 50; ++step) {
    for (Tensor* p : {&W1, &b1, &W2, &b2}) p->zero_grad();
    Tensor l = mse(forward(X, W1, b1, W2, b2), y);
    l.backward();
    if (step % 10 == 0) fmt::print("step {:>2}  loss {:.6f}\n", step, l.item());
    NoGradGuard no_grad;  // parameters are updated in place: not an op to differentiate
    for (Tensor* p : {&W1, &b1, &W2, &b2}) p->sub_(p->grad() * lr);
  }
  return match && same_forward && check.ok ? 0 : 1;
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
