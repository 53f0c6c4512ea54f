// main.cpp — the smallest tapegrad program worth starting from: a one-hidden-layer MLP
//   ŷ = W₂ · tanh(W₁ x + b₁) + b₂
// fit to y = x³ − x on [−1.5, 1.5] by minimising the mean squared error
//   L = (1/N) Σᵢ (ŷᵢ − yᵢ)²
// with Adam. Every op on tensors that require grad is recorded on the tape; loss.backward() replays
// it in reverse, leaving ∂L/∂W₁, ∂L/∂b₁, ∂L/∂W₂, ∂L/∂b₂ in the parameters' .grad().
//
// Prints the tape of the first step (the ops backward replays), the loss every 50 steps, and a last
// line "first loss X last loss Y". With a file name as argument it also writes the graph as
// Graphviz DOT (view it with: dot -Tpng graph.dot -o graph.png).
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/tapegrad.h"
#include "optim/adamw.h"

using namespace tapegrad;

namespace {

constexpr int kPoints = 64;
constexpr int kHidden = 16;
constexpr int kSteps = 300;

struct Mlp {
  Tensor w1, b1, w2, b2;

  // x [N, 1] → ŷ [N, 1]. The biases broadcast over the N rows (and their gradient is summed back).
  Tensor forward(const Tensor& x) const { return matmul(tanh(matmul(x, w1) + b1), w2) + b2; }
  std::vector<Tensor> parameters() const { return {w1, b1, w2, b2}; }
};

}  // namespace

int main(int argc, char** argv) {
  Generator gen(42);  // seeded: the same numbers, hence the same losses, on every machine

  // The data: N points x evenly spaced, targets y = x³ − x (computed on the host).
  std::vector<double> xs(kPoints), ys(kPoints);
  for (int i = 0; i < kPoints; ++i) {
    xs[i] = -1.5 + 3.0 * i / (kPoints - 1);
    ys[i] = xs[i] * xs[i] * xs[i] - xs[i];
  }
  const Tensor x = tensor(xs, {kPoints, 1}), y = tensor(ys, {kPoints, 1});

  // The parameters, leaves that require grad. W₁ ~ N(0, 1); W₂ ~ N(0, 1/hidden) keeps ŷ of order 1.
  Mlp m{randn({1, kHidden}, Options().requires_grad(), &gen).set_name("W1"),
        zeros({kHidden}, Options().requires_grad()).set_name("b1"),
        (randn({kHidden, 1}, kFloat32, &gen) / std::sqrt(double(kHidden))).requires_grad_().set_name("W2"),
        zeros({1}, Options().requires_grad()).set_name("b2")};

  // weight_decay 0: plain Adam (decoupled decay would only pull the weights towards zero).
  optim::AdamW opt(m.parameters(), optim::AdamWOptions(0.02).weight_decay(0.0));

  double first = 0, last = 0;
  for (int step = 0; step < kSteps; ++step) {
    Tensor loss = mean(pow(m.forward(x) - y, 2.0));  // L = mean((ŷ − y)²)
    if (step == 0) {
      first = loss.item();
      fmt::print("{}\n", tape_string(loss));  // what backward is about to replay, oldest first
      if (argc > 1) {
        std::ofstream(argv[1]) << to_dot(loss);
        fmt::print("graph written to {} (dot -Tpng {} -o graph.png)\n\n", argv[1], argv[1]);
      }
    }
    opt.zero_grad();
    loss.backward();  // ∂L/∂p into p.grad() for the four parameters
    opt.step();       // p ← p − lr · m̂ / (√v̂ + ε)
    last = loss.item();
    if (step % 50 == 0 || step == kSteps - 1) fmt::print("step {:4d}  loss {:.6f}\n", step, last);
  }
  fmt::print("first loss {:.6f} last loss {:.6f}\n", first, last);
  return last < first ? 0 : 1;
}
