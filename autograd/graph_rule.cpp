// graph_rule.cpp — each op's local backward rule in words, and with its numbers (graph_rule.h).
// The rules restate the backward formulas written under each forward in autograd/ops/*.cpp; the
// numbers come from the values and gradients the tape kept (RetainValuesGuard), not from a new
// computation of the gradient.
#include "autograd/graph_rule.h"

#include <cmath>
#include <fmt/format.h>

#include "autograd/graph.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace tapegrad::detail {

namespace {

const std::string& title_of(const std::vector<std::string>& titles, size_t i) {
  static const std::string unknown = "?";
  return i < titles.size() ? titles[i] : unknown;
}

bool is_reshape(std::string_view op) {
  for (std::string_view v : {"view", "reshape", "squeeze", "unsqueeze", "transpose", "permute", "expand",
                             "contiguous", "clone", "to_dtype"})
    if (op == v) return true;
  return false;
}

bool single(const Tensor& t) { return t.defined() && t.numel() == 1; }

double number(const Tensor& t) {
  NoGradGuard no_grad;
  return t.detach().to(kCPU).to(kFloat64).reshape({}).item();
}

std::string shown(double v) { return value_lines(scalar_tensor(v, kFloat64), 1).front(); }

}  // namespace

std::string local_rule(std::string_view op, size_t slot, const std::vector<std::string>& titles) {
  if (op == "mul") return "grad × " + title_of(titles, 1 - std::min<size_t>(slot, 1));
  if (op == "add" || op == "add_scalar") return "grad × 1";
  if (op == "sub") return slot == 0 ? "grad × 1" : "grad × (−1)";
  if (op == "neg") return "grad × (−1)";
  if (op == "div") return slot == 0 ? "grad × 1/" + title_of(titles, 1)
                                    : "grad × (−" + title_of(titles, 0) + "/" + title_of(titles, 1) + "²)";
  if (op == "tanh") return "grad × (1 − out²)";
  if (op == "sigmoid") return "grad × out·(1 − out)";
  if (op == "exp") return "grad × out";
  if (op == "log") return "grad × 1/x";
  if (op == "sqrt") return "grad × 1/(2·out)";
  if (op == "rsqrt") return "grad × (−out³/2)";
  if (op == "abs") return "grad × sign(x)";
  if (op == "relu") return "grad × (1 if x > 0 else 0)";
  if (op == "silu") return "grad × σ(x)·(1 + x·(1 − σ(x)))";
  if (op == "pow") return "grad × p·x^(p−1)";
  if (op == "mul_scalar") return "grad × c";
  if (op == "sum") return "grad, copied to every element summed";
  if (op == "max") return "grad, to the element that was the max";
  if (op == "matmul") return slot == 0 ? "grad · " + title_of(titles, 1) + "ᵀ" : title_of(titles, 0) + "ᵀ · grad";
  if (is_reshape(op)) return "grad, in the input's shape";
  return "";
}

std::string local_rule_with_numbers(const RuleInputs& in) {
  const std::string rule = local_rule(in.op, in.slot, in.titles);
  if (rule.empty() || !single(in.received) || !single(in.added)) return rule;
  const double g = number(in.received), c = number(in.added);
  // The factor the rule multiplies grad by: the other input for mul (exact), else added / received.
  double factor = 0;
  bool known = false;
  if (in.op == "mul" && in.values.size() == 2 && single(in.values[1 - std::min<size_t>(in.slot, 1)])) {
    factor = number(in.values[1 - std::min<size_t>(in.slot, 1)]);
    known = true;
  } else if (rule.rfind("grad × ", 0) == 0 && g != 0) {
    factor = c / g;
    known = true;
  } else if (rule.rfind("grad", 0) == 0 && rule.rfind("grad × ", 0) != 0) {
    return fmt::format("{} = {}", rule, shown(c));  // "grad, in the input's shape = 0.5"
  }
  if (!known) return fmt::format("{} = {}", rule, shown(c));
  const std::string f = shown(factor);
  return fmt::format("{} = {} × {} = {}", rule, shown(g), factor < 0 ? "(" + f + ")" : f, shown(c));
}

}  // namespace tapegrad::detail
