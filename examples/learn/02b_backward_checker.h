// 02b_backward_checker.h — the check of chapter 2b (docs/learn/02b_write_backward.md); you need not read it.
//
// check_backward(graph, my_backward, rule) records the graph, runs your my_backward on it with `rule` watched,
// then Tensor::backward, and prints every value's gradient beside backward()'s and (for the leaves) central
// finite differences. When something differs it names the mistake:
//   * wrong order:      a step ran before a step that reads its output (its gradient was not complete yet);
//   * wrong local rule: a step's rule gave an input a share other than the entry's own local_backward gives;
//   * missing +=:       a value read by several steps did not get the sum of their shares.
// Included by examples/learn/02b_write_backward.cpp only.
#pragma once
#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/node.h"
#include "autograd/tape_steps.h"
#include "autograd/tapegrad.h"

namespace learn {

using tapegrad::Tensor;
using tapegrad::TapeStep;

// A step's local rule: given d root/d(output), the share of the gradient for each input.
using LocalRule = std::function<std::vector<Tensor>(const TapeStep& step, const Tensor& grad_output)>;
// d root/d(value) for each value on the tape, by the value's name ("#3", "x1").
using Grads = std::map<std::string, Tensor>;
using Backward = std::function<Grads(const Tensor& root, const LocalRule& local_rule)>;

struct TestGraph {
  std::string title;                 // printed above the table
  std::string root;                  // the root's name in messages: "o" gives "do/dx1"
  std::vector<Tensor> leaves;        // named float64 leaves that require grad
  std::function<Tensor(const std::vector<Tensor>& leaves)> forward;  // records the graph; 0-d result
};

namespace check_detail {

// The tensor's numbers as the graph drawings show them (4 significant digits), on one line.
inline std::string show(const Tensor& t) {
  if (!t.defined()) return "(none)";
  std::string s;
  for (const std::string& line : tapegrad::value_lines(t)) s += line;
  return s;
}

// Same shape and every |a − b| ≤ atol + rtol·|b|.
inline bool close(const Tensor& a, const Tensor& b, double atol, double rtol) {
  if (!a.defined() || !b.defined() || a.shape() != b.shape()) return false;
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
  return true;
}
inline bool same(const Tensor& a, const Tensor& b) { return close(a, b, 1e-12, 1e-9); }

inline std::string label(const TapeStep& s) { return fmt::format("#{} {}", s.seq, s.op); }

// d root/d leaf by central differences, (f(x + ε) − f(x − ε)) / 2ε for each element, as gradcheck does.
inline Tensor finite_differences(const TestGraph& g, const Tensor& leaf) {
  tapegrad::NoGradGuard no_grad;
  const double eps = 1e-6;
  Tensor out = tapegrad::zeros(leaf.shape(), leaf.options());
  double* x = leaf.data<double>();
  double* d = out.data<double>();
  for (int64_t k = 0; k < leaf.numel(); ++k) {
    const double orig = x[k];
    x[k] = orig + eps;
    const double up = g.forward(g.leaves).item();
    x[k] = orig - eps;
    const double down = g.forward(g.leaves).item();
    x[k] = orig;
    d[k] = (up - down) / (2 * eps);
  }
  return out;
}

}  // namespace check_detail

// Runs my_backward on the graph and prints the comparison; true when every gradient is right.
inline bool check_backward(const TestGraph& graph, const Backward& my_backward, const LocalRule& rule) {
  using namespace check_detail;
  tapegrad::RetainValuesGuard keep;  // steps carry their values; backward() keeps each entry's gradient
  for (Tensor leaf : graph.leaves) leaf.zero_grad();
  const Tensor root = graph.forward(graph.leaves);
  const std::vector<TapeStep> steps = tapegrad::tape_steps(root);
  fmt::print("{}\n", graph.title);

  std::map<std::string, std::vector<std::string>> readers;  // value → the steps that read it
  for (const TapeStep& s : steps)
    for (const auto& in : s.inputs)
      if (in.needs_grad) readers[in.name].push_back(label(s));

  // The rule, watched: the order the steps run in, and what each gives to whom.
  std::vector<std::string> ran, order_problems, rule_problems;
  std::map<std::string, std::vector<std::pair<std::string, Tensor>>> shares;  // value → (step, share)
  const std::string d_root = "d" + graph.root + "/d";
  const LocalRule watched = [&](const TapeStep& s, const Tensor& g) {
    const std::string me = label(s);
    for (const std::string& reader : readers[s.output.name])
      if (std::find(ran.begin(), ran.end(), reader) == ran.end() && order_problems.empty())
        order_problems.push_back(fmt::format(
            "wrong order — my_backward ran step {} before {}, which reads {}'s output, so the gradient of {} "
            "was not complete yet: walk the steps newest first (the tape in reverse)",
            me, reader, me, s.output.name));
    ran.push_back(me);
    TG_CHECK(g.defined(), "my_backward passed step {} no gradient (an undefined tensor)", me);
    std::vector<Tensor> got = rule(s, g);
    const std::vector<Tensor> want = s.local_backward(g);
    TG_CHECK(got.size() == s.inputs.size(), "the local rule of step {} gave {} gradients for its {} inputs", me,
             got.size(), s.inputs.size());
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      const auto& in = s.inputs[i];
      if (!in.needs_grad) continue;
      TG_CHECK(got[i].defined() && got[i].shape() == in.shape,
               "the local rule of step {} gave input {} ({}) a gradient of shape {}; {} has shape {}", me, i, in.name,
               got[i].defined() ? fmt::format("{}", got[i].shape()) : "(none)", in.name, in.shape);
      if (!same(got[i], want[i]) && rule_problems.empty())
        rule_problems.push_back(fmt::format(
            "wrong local rule — the rule for {} (step {}) gives its input {} the share {}, but the entry's own "
            "backward gives {}",
            s.op, me, in.name, show(got[i]), show(want[i])));
      shares[in.name].emplace_back(me, got[i]);
    }
    return got;
  };

  Grads mine;
  std::string stopped;
  try {
    mine = my_backward(root, watched);
  } catch (const std::exception& e) {
    stopped = e.what();
  }
  root.backward();

  // What backward() gave: each entry's gathered gradient, each leaf's .grad.
  Grads theirs;
  for (const tapegrad::Node* n : tapegrad::tape_entries(root))
    theirs[fmt::format("#{}", n->seq())] = n->retained_grad();
  std::vector<std::pair<std::string, std::string>> rows;  // (value name, row label), root first
  for (auto s = steps.rbegin(); s != steps.rend(); ++s) rows.emplace_back(s->output.name, label(*s));
  for (const Tensor& leaf : graph.leaves) {
    rows.emplace_back(leaf.name(), leaf.name());
    theirs[leaf.name()] = leaf.grad().defined() ? leaf.grad() : tapegrad::zeros_like(leaf);
  }

  fmt::print("my_backward ran: {}\n", fmt::join(ran, ", "));
  // The last column can be long (a matrix): the columns before it say "same" when they agree with it.
  fmt::print("{:<10} {:<7} {:<12} {:<13} {}\n", "value", "shape", "backward()", "finite diff.", "my_backward");
  std::vector<std::string> wrong;  // the values whose gradient is not backward()'s
  std::vector<std::string> fd_problems;
  for (const auto& [name, row] : rows) {
    const Tensor m = mine.contains(name) ? mine.at(name) : Tensor(), t = theirs[name];
    const bool ok = same(m, t);
    if (!ok) wrong.push_back(name);
    std::string fd = "-";
    if (name[0] != '#') {
      const auto leaf = std::find_if(graph.leaves.begin(), graph.leaves.end(),
                                     [&](const Tensor& l) { return l.name() == name; });
      const Tensor numeric = finite_differences(graph, *leaf);
      fd = close(m, numeric, 1e-6, 1e-4) ? "same" : show(numeric);
      if (ok && fd != "same")
        fd_problems.push_back(fmt::format("{}{}: my_backward and backward() give {}, finite differences give {}",
                                          d_root, name, show(m), fd));
    }
    fmt::print("{:<10} {:<7} {:<12} {:<13} {}\n", row, fmt::format("{}", t.shape()), ok ? "same" : show(t), fd,
               show(m));
  }

  std::vector<std::string> problems;
  if (!stopped.empty()) problems.push_back("my_backward stopped: " + stopped);
  problems.insert(problems.end(), order_problems.begin(), order_problems.end());
  problems.insert(problems.end(), rule_problems.begin(), rule_problems.end());
  for (const std::string& name : wrong) {
    const auto& parts = shares[name];
    if (readers[name].size() >= 2 && parts.size() >= 2) {
      Tensor sum = parts[0].second;
      std::vector<std::string> terms;
      std::string alone;
      for (size_t k = 0; k < parts.size(); ++k) {
        if (k > 0) sum = sum + parts[k].second;
        terms.push_back(fmt::format("{} from {}", show(parts[k].second), parts[k].first));
        if (same(mine[name], parts[k].second)) alone = fmt::format(" (the share of {} alone)", parts[k].first);
      }
      if (!same(mine[name], sum)) {
        problems.push_back(fmt::format(
            "missing += — {} is read by {} steps ({}), so {}{} is the sum of their shares ({}): {}, but my_backward "
            "gives {}{}: add each share to the gradient (+=), do not assign it (=)",
            name, readers[name].size(), fmt::join(readers[name], ", "), d_root, name, fmt::join(terms, ", "),
            show(sum), show(mine[name]), alone));
        continue;
      }
    }
    problems.push_back(fmt::format("{}{}: my_backward gives {}, backward() gives {}", d_root, name,
                                   show(mine.contains(name) ? mine.at(name) : Tensor()), show(theirs[name])));
  }
  problems.insert(problems.end(), fd_problems.begin(), fd_problems.end());
  if (problems.empty()) {
    fmt::print("MATCH: my_backward gives every value the gradient backward() and finite differences give\n");
    return true;
  }
  fmt::print("MISMATCH: {}\n", problems[0]);
  for (size_t k = 1; k < problems.size() && k < 4; ++k) fmt::print("  also: {}\n", problems[k]);
  return false;
}

}  // namespace learn
