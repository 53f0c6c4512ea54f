// 02_chain_rule.cpp — chapter 2 of docs/learn: the chain rule on a small graph, one neuron
//
//   n = x1·w1 + x2·w2 + b        o = tanh(n)
//
// 1. The tape that recording o left behind (tape_string), in the order backward replays it upwards.
// 2. Every entry's value and gradient dO/d(entry), kept by RetainValuesGuard, and the leaves' .grad.
//    The same graph is written as Graphviz DOT (neuron.dot) and as an HTML page that steps through
//    backward (neuron.html), in the current directory.
// 3. The same gradients by hand: multiply the local derivatives along the path from o to each leaf.
//      do/dn = 1 − o²  (tanh' = 1 − tanh²)     dn/db = 1     dn/dw1 = x1     dn/dx1 = w1   (…x2, w2)
//
// Exercise: swap tanh for sigmoid — change `activation` and `activation_slope` (σ'(n) = σ(1 − σ));
// the last line says MATCH when your local derivative is right.
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "autograd/node.h"
#include "autograd/tapegrad.h"

using namespace tapegrad;

namespace {

// ---- the activation and its local derivative, written in terms of its output o (the exercise) ----
Tensor activation(const Tensor& n) { return tanh(n); }
double activation_slope(double o) { return 1.0 - o * o; }  // d tanh(n)/dn = 1 − tanh(n)² = 1 − o²

Tensor leaf(double value, const char* name) {
  Tensor t = scalar_tensor(value, Options(kFloat64).requires_grad());
  t.set_name(name);
  return t;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l;
  return s;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

}  // namespace

int run() {
  RetainValuesGuard keep;  // entries keep their values and gradients (costs nothing when absent)

  Tensor x1 = leaf(1.5, "x1"), w1 = leaf(-0.8, "w1"), x2 = leaf(-2.0, "x2"), w2 = leaf(0.4, "w2"),
         b = leaf(0.5, "b");
  // One product per statement, so the tape's order is the same with every compiler.
  Tensor x1w1 = x1 * w1;
  Tensor x2w2 = x2 * w2;
  Tensor n = x1w1 + x2w2 + b;
  Tensor o = activation(n);

  // --- 1. the tape ---
  fmt::print("{}\n", tape_string(o));

  // --- 2. values and gradients on the graph ---
  o.backward();
  fmt::print("{:<16} {:>10} {:>10}\n", "entry", "value", "do/d(it)");
  for (const Node* e : tape_entries(o))
    fmt::print("{:<16} {:>10} {:>10}\n", fmt::format("#{} {}", e->seq(), e->name()),
               joined(value_lines(e->retained_value())), joined(value_lines(e->retained_grad())));
  for (const Tensor& t : {x1, w1, x2, w2, b})
    fmt::print("{:<16} {:>10} {:>10}\n", "leaf " + t.name(), joined(value_lines(t)), joined(value_lines(t.grad())));
  write_text("neuron.dot", to_dot(o, DotOptions{.values = true, .grads = true}));
  write_text("neuron.html", to_html(o, "one neuron: o = tanh(x1·w1 + x2·w2 + b)"));
  fmt::print("wrote neuron.dot (dot -Tsvg neuron.dot -o neuron.svg) and neuron.html (open it in a browser)\n\n");

  // --- 3. by hand: the chain rule, one factor per edge on the path from o down to the leaf ---
  const double ov = o.item();
  const double do_dn = activation_slope(ov);   // o = act(n)
  const double do_db = do_dn * 1.0;            // n = (x1·w1 + x2·w2) + b: d/db of a sum is 1
  const double do_dw1 = do_dn * 1.0 * x1.item();  // n ← sum ← x1·w1: d(x1·w1)/dw1 = x1
  const double do_dx1 = do_dn * 1.0 * w1.item();
  const double do_dw2 = do_dn * 1.0 * x2.item();
  const double do_dx2 = do_dn * 1.0 * w2.item();

  fmt::print("{:<6} {:>12} {:>12}  {}\n", "leaf", "backward", "by hand", "path");
  bool all_match = true;
  auto row = [&](const Tensor& t, double by_hand, const char* path) {
    const double by_tape = t.grad().item();
    all_match = all_match && std::abs(by_tape - by_hand) <= 1e-12;
    fmt::print("{:<6} {:>12.8f} {:>12.8f}  {}\n", t.name(), by_tape, by_hand, path);
  };
  row(b, do_db, "do/dn · 1");
  row(w1, do_dw1, "do/dn · 1 · x1");
  row(x1, do_dx1, "do/dn · 1 · w1");
  row(w2, do_dw2, "do/dn · 1 · x2");
  row(x2, do_dx2, "do/dn · 1 · w2");
  fmt::print("{}: do/dn = {:.8f}; every leaf's gradient by hand {} backward's\n", all_match ? "MATCH" : "MISMATCH",
             do_dn, all_match ? "equals" : "does not equal");
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
