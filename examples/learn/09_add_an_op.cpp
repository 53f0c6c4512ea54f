// 09_add_an_op.cpp — chapter 9 (docs/learn/09_add_an_op.md): the op table, and a gradcheck of every
// elementwise unary op in it.
//
// It reads the same table the library is built from (kernels/unary_ops.def, an X-macro), so after you
// add a row — softplus, in the chapter's exercise — rebuild this program and your op is listed and
// gradchecked here too: y = op(x) on a float64 [2, 3] input, backward() against central differences.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/tapegrad.h"

using namespace tapegrad;

namespace {

struct Row {
  std::string functor, name, reads, api;
  std::function<Tensor(const Tensor&)> fn;  // empty for `scalar` rows (their function takes a parameter)
};

// One Row per line of the table. A `unary` row names a function tapegrad::name(x); the lambda picks it
// out of its overloads.
#define TG_ROW_FN_unary(name) [](const Tensor& x) { return tapegrad::name(x); }
#define TG_ROW_FN_scalar(name) nullptr
#define TG_UNARY(Functor, name, reads, api) Row{#Functor, #name, #reads, #api, TG_ROW_FN_##api(name)},
const std::vector<Row> kTable = {
#include "kernels/unary_ops.def"
};
#undef TG_UNARY
#undef TG_ROW_FN_unary
#undef TG_ROW_FN_scalar

}  // namespace

int main() {
  try {
    fmt::print("kernels/unary_ops.def: {} rows\n", kTable.size());
    fmt::print("{:<10} {:<11} {:<6} {:<7} {}\n", "Functor", "name", "reads", "api", "gradcheck of sum(name(x)), x float64 [2, 3] in [0.5, 2]");
    int failed = 0;
    for (const Row& row : kTable) {
      std::string verdict = "(takes a scalar: written by hand, its sample is in the suite)";
      if (row.fn) {
        // Inputs in [0.5, 2]: inside the domain of log, sqrt, rsqrt, and away from abs's and relu's kink.
        Generator gen(9);
        Tensor x = (rand({2, 3}, kFloat64, &gen) * 1.5 + 0.5).requires_grad_();
        const GradcheckResult r = gradcheck([&](const std::vector<Tensor>& in) { return row.fn(in[0]).sum(); }, {x});
        verdict = fmt::format("{}  max |analytic - numeric| {:.1e}", r.ok ? "ok" : "FAILED", r.max_abs_error);
        failed += r.ok ? 0 : 1;
      }
      fmt::print("{:<10} {:<11} {:<6} {:<7} {}\n", row.functor, row.name, row.reads, row.api, verdict);
    }
    fmt::print("{}\n", failed == 0 ? "every unary op's backward matches finite differences"
                                   : fmt::format("{} op(s) FAILED: check their df and reads", failed));
    return failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
