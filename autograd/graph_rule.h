// graph_rule.h — why a backward step adds what it adds: each op's local rule as a learner reads it
// ("grad × w2", "grad × (1 − out²)"), and, for one-number gradients, the same with its numbers
// ("grad × w2 = 0.1807 × 0.4 = 0.07228"). Used by the HTML stepper (graph_html.cpp).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad::detail {

// What one tape entry's backward hands one input, as the page explains it.
struct RuleInputs {
  std::string_view op;                       // the entry's name: "mul", "tanh", …
  size_t slot = 0;                           // which input
  std::vector<std::string> titles;           // every input's title on the page ("w2", "#3 add", "const x")
  std::vector<Tensor> values;                // every input's value (undefined where none was kept)
  Tensor received;                           // dL/d(out), the gradient the entry received
  Tensor added;                              // what it passed to input `slot`
};

// The rule in words and symbols; "grad" is dL/d(the entry's output). Empty for an op without one here.
std::string local_rule(std::string_view op, size_t slot, const std::vector<std::string>& titles);

// The rule with its numbers when the received gradient and the contribution are single numbers
// ("grad × w2 = 0.1807 × 0.4 = 0.07228"), else the rule alone; empty when the op has no rule here.
std::string local_rule_with_numbers(const RuleInputs& in);

}  // namespace tapegrad::detail
