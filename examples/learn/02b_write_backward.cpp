// 02b_write_backward.cpp — chapter 2b of docs/learn: you write backward() yourself.
//
// tape_steps(root) (autograd/tape_steps.h) lists the tape's entries, oldest first. Each step has its op, its
// inputs and its output (a name such as "#3" or "x1", a shape, a value) and local_backward, the entry's own
// local rule: the gradient of its output in, one share per input out. my_backward below walks the steps
// newest first, applies each step's local rule and adds (+=) each share to the gradient of its input.
// my_local_rule holds the local rules of add, mul and tanh, for the scalar graphs.
//
// The program runs my_backward on three graphs and compares every gradient with backward()'s and, for the
// leaves, with finite differences (the check is in 02b_backward_checker.h; you need not read it):
//   1. chapter 2's neuron, o = tanh(x1·w1 + x2·w2 + b), with my_local_rule;
//   2. a tensor graph, L = Σ tanh(X·W + b) — a matmul, a broadcast add, a reduction — with the tape's own
//      local rules (local_backward; chapters 3 and 4 derive them);
//   3. the neuron with x1 used twice, o = tanh(x1·w1 + x2·w2 + b + x1), with my_local_rule.
// A wrong order, a missing += or a wrong local rule makes it print MISMATCH, naming the mistake, and exit 1.
//
// Exercise: delete the bodies of my_backward and my_local_rule (between the EXERCISE lines) and write them
// again from the chapter; every graph says MATCH when they are right.
#include <exception>
#include <map>
#include <ranges>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "02b_backward_checker.h"
#include "autograd/tape_steps.h"
#include "autograd/tapegrad.h"

using namespace tapegrad;
using learn::LocalRule;

namespace {

// ================================= EXERCISE: write backward =================================
// d root/d v for every value v on root's tape, by the value's name ("#3", "x1"). local_rule(step, g) gives
// the share of the gradient g = d root/d(step's output) that the step passes to each of its inputs.
std::map<std::string, Tensor> my_backward(const Tensor& root, const LocalRule& local_rule) {
  const std::vector<TapeStep> steps = tape_steps(root);
  std::map<std::string, Tensor> grad;
  // Every value's gradient starts at zero (the root is no step's input) ...
  for (const TapeStep& step : steps)
    for (const TapeValue& in : step.inputs)
      if (in.needs_grad) grad[in.name] = zeros(in.shape, in.dtype);
  // ... but the root's: d root/d root = 1.
  grad[steps.back().output.name] = ones(root.shape(), root.options());
  // Newest step first: when a step runs, every step that reads its output has already passed it its share.
  for (const TapeStep& step : std::views::reverse(steps)) {
    const std::vector<Tensor> local = local_rule(step, grad[step.output.name]);
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      const TapeValue& in = step.inputs[i];
      if (!in.needs_grad) continue;              // a constant: no gradient
      grad[in.name] = grad[in.name] + local[i];  // +=: a value read by several steps gets all their shares
    }
  }
  return grad;
}

// The local rules of the scalar graphs' ops. g is d root/d(output); each input gets g times d(output)/d(input).
std::vector<Tensor> my_local_rule(const TapeStep& step, const Tensor& g) {
  if (step.op == "add") return {g, g};           // s = a + b: ds/da = ds/db = 1
  if (step.op == "mul") {                        // p = a·b: dp/da = b, dp/db = a
    const Tensor& a = step.inputs[0].value;
    const Tensor& b = step.inputs[1].value;
    return {g * b, g * a};
  }
  if (step.op == "tanh") {                       // o = tanh(n): do/dn = 1 − tanh²(n) = 1 − o²
    const Tensor& o = step.output.value;
    return {g * (1.0 - o * o)};
  }
  throw Error(fmt::format("my_local_rule: no rule for '{}' (step #{})", step.op, step.seq));
}
// ============================================================================================

// Every other op's rule is the tape's own: the entry's backward, as tape_steps hands it out.
std::vector<Tensor> tape_rule(const TapeStep& step, const Tensor& g) { return step.local_backward(g); }

Tensor leaf(double value, const char* name) {
  Tensor t = scalar_tensor(value, Options(kFloat64).requires_grad());
  t.set_name(name);
  return t;
}

// 1. Chapter 2's neuron. One op per statement, so that the tape's order is the same with every compiler.
learn::TestGraph neuron(bool x1_twice) {
  auto forward = [x1_twice](const std::vector<Tensor>& p) {
    const Tensor &x1 = p[0], &w1 = p[1], &x2 = p[2], &w2 = p[3], &b = p[4];
    Tensor x1w1 = x1 * w1;
    Tensor x2w2 = x2 * w2;
    Tensor n = x1w1 + x2w2;
    n = n + b;
    if (x1_twice) n = n + x1;
    return tanh(n);
  };
  return {x1_twice ? "3. x1 used twice: o = tanh(x1·w1 + x2·w2 + b + x1), with my_local_rule"
                   : "1. the neuron of chapter 2: o = tanh(x1·w1 + x2·w2 + b), with my_local_rule",
          "o", {leaf(1.5, "x1"), leaf(-0.8, "w1"), leaf(-2.0, "x2"), leaf(0.4, "w2"), leaf(0.5, "b")}, forward};
}

// 2. A tensor graph: 4 examples X [4, 3] (constants), W [3, 2], b [2] added to every row (broadcast).
learn::TestGraph tensor_graph() {
  Generator gen(7);
  const Tensor X = randn({4, 3}, kFloat64, &gen).set_name("X");
  Tensor W = randn({3, 2}, Options(kFloat64).requires_grad(), &gen).set_name("W");
  Tensor b = (0.1 * randn({2}, kFloat64, &gen)).requires_grad_().set_name("b");
  auto forward = [X](const std::vector<Tensor>& p) {
    Tensor xw = matmul(X, p[0]);  // [4, 2]
    Tensor z = xw + p[1];         // b [2] is added to each of the 4 rows
    return tanh(z).sum();         // 0-d
  };
  return {"2. a tensor graph: L = sum(tanh(X·W + b)), X [4, 3], W [3, 2], b [2], with the tape's local rules", "L",
          {W, b}, forward};
}

}  // namespace

int run() {
  bool ok = learn::check_backward(neuron(false), my_backward, my_local_rule);
  fmt::print("\n");
  ok = learn::check_backward(tensor_graph(), my_backward, tape_rule) && ok;
  fmt::print("\n");
  ok = learn::check_backward(neuron(true), my_backward, my_local_rule) && ok;
  return ok ? 0 : 1;
}

// An error (an op your rule does not know, say) is printed as one line, not a crash.
int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
