// gradcheck.cpp — full-Jacobian comparison of backward against central differences.
#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace tapegrad {

namespace {

// Address of element `flat` (row-major over the shape) of a float64 tensor, any strides, on its
// device; read and written through the backend, so gradcheck runs on every device.
double* element(const Tensor& t, int64_t flat) {
  int64_t off = 0;
  for (int d = t.dim() - 1; d >= 0; --d) {
    off += (flat % t.shape()[d]) * t.strides()[d];
    flat /= t.shape()[d];
  }
  return static_cast<double*>(t.data_ptr()) + off;
}
double read_element(const Tensor& t, const double* p) {
  double v = 0;
  t.storage()->backend().copy_to_host(&v, p, sizeof v);
  return v;
}
void write_element(const Tensor& t, double* p, double v) { t.storage()->backend().copy_from_host(p, &v, sizeof v); }

// True when two different indices of t address the same element: sorted by stride, each dim's
// stride must exceed the span of the dims inside it.
bool self_overlapping(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims with size > 1
  for (int d = 0; d < t.dim(); ++d)
    if (t.shape()[d] > 1) dims.emplace_back(std::abs(t.strides()[d]), t.shape()[d]);
  std::sort(dims.begin(), dims.end());
  int64_t span = 1;  // elements covered by the inner dims
  for (auto [stride, size] : dims) {
    if (stride < span) return true;
    span = stride * (size - 1) + span;
  }
  return false;
}

std::vector<double> evaluate(const GradcheckFn& fn, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return fn(inputs).to_vector<double>();
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps, double atol,
                          double rtol) {
  bool any = false;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    TG_CHECK(x.defined(), "gradcheck: input {} is undefined", k);
    if (!x.requires_grad()) continue;
    any = true;
    TG_CHECK(x.dtype() == kFloat64, "gradcheck: input {} is {}; finite differences need float64", k, x.dtype());
    TG_CHECK(x.is_leaf(), "gradcheck: input {} must be a leaf (create it with requires_grad, or detach())", k);
    TG_CHECK(!self_overlapping(x),
             "gradcheck: input {} (shape {}, strides {}) has overlapping memory; expand it inside fn instead", k,
             x.shape(), x.strides());
    for (size_t j = 0; j < k; ++j)
      TG_CHECK(!inputs[j].defined() || inputs[j].storage() != x.storage(),
               "gradcheck: inputs {} and {} share storage, so perturbing one changes the other; pass one and build "
               "the other inside fn",
               j, k);
  }
  TG_CHECK(any, "gradcheck: no input requires grad");

  // Analytic Jacobian, one row per output element, through one retained graph.
  for (const Tensor& x : inputs) const_cast<Tensor&>(x).zero_grad();
  const Tensor out = fn(inputs);
  TG_CHECK(out.dtype() == kFloat64, "gradcheck: fn returned {}; it must return float64", out.dtype());
  const int64_t m = out.numel();
  std::vector<std::vector<std::vector<double>>> analytic(inputs.size());  // [input][out][elem]
  for (int64_t j = 0; j < m; ++j) {
    if (!out.requires_grad()) break;  // no dependence on any input: all zeros
    std::vector<double> onehot(static_cast<size_t>(m), 0.0);
    onehot[j] = 1.0;
    out.backward(tensor(onehot, out.shape(), Options(kFloat64).device(out.device())), /*retain_graph=*/j + 1 < m);
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Tensor& x = inputs[k];
      if (!x.requires_grad()) continue;
      const Tensor g = x.grad();
      analytic[k].push_back(g.defined() ? g.to_vector<double>() : std::vector<double>(x.numel(), 0.0));
      const_cast<Tensor&>(x).zero_grad();
    }
  }

  GradcheckResult r;
  double worst_ratio = 0.0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    for (int64_t i = 0; i < x.numel(); ++i) {
      double* p = element(x, i);
      const double orig = read_element(x, p);
      write_element(x, p, orig + eps);
      const std::vector<double> plus = evaluate(fn, inputs);
      write_element(x, p, orig - eps);
      const std::vector<double> minus = evaluate(fn, inputs);
      write_element(x, p, orig);
      for (int64_t j = 0; j < m; ++j) {
        const double num = (plus[j] - minus[j]) / (2 * eps);
        const double ana = out.requires_grad() ? analytic[k][j][i] : 0.0;
        const double err = std::abs(ana - num);
        const double ratio = err / (atol + rtol * std::abs(num));
        const bool bad = !(ratio <= 1.0);  // NaN counts as a failure
        r.max_abs_error = std::max(r.max_abs_error, err);
        if (bad && r.ok) worst_ratio = 0.0;  // the first failure replaces any passing "worst"
        if ((bad || r.ok) && (!(ratio <= worst_ratio) || r.input < 0)) {
          worst_ratio = ratio;
          r.input = static_cast<int>(k), r.index = i, r.output = j, r.analytic = ana, r.numeric = num;
        }
        if (bad) r.ok = false;
      }
    }
  }
  r.message = fmt::format(
      "gradcheck {}: worst element: input {} index {} (output {}): analytic {:.10g} vs numeric {:.10g} "
      "(|diff| {:.3g}, allowed {:.3g}); max |diff| {:.3g}",
      r.ok ? "passed" : "FAILED", r.input, r.index, r.output, r.analytic, r.numeric, std::abs(r.analytic - r.numeric),
      atol + rtol * std::abs(r.numeric), r.max_abs_error);
  return r;
}

}  // namespace tapegrad
