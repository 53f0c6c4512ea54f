// gradcheck.h — checks analytic gradients against central finite differences, in float64.
//
//   auto r = gradcheck([](const std::vector<Tensor>& x) { return tanh(x[0]) * x[1]; },
//                      {randn({3}, Options(kFloat64).requires_grad()), randn({3}, kFloat64)});
//   REQUIRE(r.ok);   // else r.message names the worst element
//
// For every output element j (one backward each, through one retained graph) the analytic row
// ∂y_j/∂x is compared with the numeric (f(x + ε e_i) − f(x − ε e_i)) / 2ε for every element i of
// every input that requires grad. An element passes when |analytic − numeric| ≤ atol + rtol·|numeric|.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad {

struct GradcheckResult {
  bool ok = true;
  int input = -1;         // the worst element: which input,
  int64_t index = -1;     // its flat (row-major) index in that input,
  int64_t output = -1;    // which output element,
  double analytic = 0.0;  // and both derivatives
  double numeric = 0.0;
  double max_abs_error = 0.0;
  std::string message;    // human-readable summary
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6,
                          double atol = 1e-5, double rtol = 1e-3);

}  // namespace tapegrad
