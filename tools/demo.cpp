// demo.cpp — an MLP  y = W₂ tanh(W₁ x + b₁) + b₂  fit to y = sin(3x) + noise on 64 points,
// by plain gradient descent (optim::SGD without momentum: p ← p − lr·∂L/∂p) on the tape.
#include "tools/demo.h"

#include <cmath>

#include "autograd/ops_from_table.h"
#include "autograd/tapegrad.h"
#include "optim/sgd.h"

namespace tapegrad::demo {

namespace {

struct Mlp {
  Tensor w1, b1, w2, b2;
  Tensor forward(const Tensor& x) const { return matmul(tanh(matmul(x, w1) + b1), w2) + b2; }
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
};

Tensor mse(const Tensor& pred, const Tensor& target) { return mean(pow(pred - target, 2.0)); }

}  // namespace

Result train_mlp(const Config& cfg, const std::function<void(int, double)>& log) {
  Generator gen(cfg.seed);
  // data: x in [-1, 1] as [N, 1], y = sin(3x) + 0.05·noise (targets computed on the host)
  std::vector<double> xs(cfg.points), ys(cfg.points);
  for (int i = 0; i < cfg.points; ++i) {
    xs[i] = -1.0 + 2.0 * i / (cfg.points - 1);
    ys[i] = std::sin(3.0 * xs[i]) + 0.05 * gen.normal();
  }
  const Tensor x = tensor(xs, {cfg.points, 1}), y = tensor(ys, {cfg.points, 1});

  // parameters: N(0, 1) for W1 (inputs are in [-1, 1]), N(0, 1/hidden) for W2, zero biases
  Mlp m{randn({1, cfg.hidden}, kFloat32, &gen).requires_grad_(), zeros({cfg.hidden}, Options().requires_grad()),
        (randn({cfg.hidden, 1}, kFloat32, &gen) * (1.0 / std::sqrt(cfg.hidden))).requires_grad_(),
        zeros({1}, Options().requires_grad())};
  m.w1.set_name("W1"), m.b1.set_name("b1"), m.w2.set_name("W2"), m.b2.set_name("b2");

  optim::SGD sgd(m.params(), optim::SGDOptions(cfg.lr));
  Result r;
  for (int step = 0; step <= cfg.steps; ++step) {
    Tensor loss = mse(m.forward(x), y);
    if (step == 0) {
      r.initial_loss = loss.item();
      r.tape = tape_string(loss);
      r.dot = to_dot(loss);
    }
    sgd.zero_grad();
    loss.backward();
    sgd.step();
    r.final_loss = loss.item();
    if (step % 50 == 0 || step == cfg.steps) log(step, r.final_loss);
  }

  // The same model in float64, checked by finite differences.
  auto as64 = [](const Tensor& t) { return t.detach().to(kFloat64).requires_grad_(); };
  std::vector<Tensor> p64{as64(m.w1), as64(m.b1), as64(m.w2), as64(m.b2)};
  const Tensor x64 = x.narrow(0, 0, 8).to(kFloat64), y64 = y.narrow(0, 0, 8).to(kFloat64);
  auto fn = [&](const std::vector<Tensor>& p) { return mse(Mlp{p[0], p[1], p[2], p[3]}.forward(x64), y64); };
  const GradcheckResult gc = gradcheck(fn, p64);
  r.gradcheck_ok = gc.ok;
  r.gradcheck_message = gc.message;
  return r;
}

Tensor example_expression() {
  Generator gen(7);
  Tensor x = randn({4, 3}, kFloat32, &gen).set_name("x");
  Tensor w = randn({3}, Options().requires_grad(), &gen).set_name("w");
  Tensor b = zeros({1}, Options().requires_grad()).set_name("b");
  Tensor y = randn({4}, kFloat32, &gen).set_name("y");
  return pow(tanh(matmul(x, w) + b) - y, 2.0).sum();
}

}  // namespace tapegrad::demo
