// clip_grad.cpp — clip_grad_norm (formula in clip_grad.h, repeated next to the code).
#include "optim/clip_grad.h"

#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/ops_from_table.h"
#include "kernels/error.h"

namespace tapegrad::optim {

namespace {
void check_max_norm(double max_norm) {
  TG_CHECK(std::isfinite(max_norm) && max_norm >= 0.0, "clip_grad_norm: max_norm must be finite and >= 0, but is {}",
           max_norm);
}
bool all_grads_on_cpu(const std::vector<Tensor>& params) {
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined() && p.grad().device().type != DeviceType::CPU) return false;
  return true;
}
}  // namespace

Tensor clip_grad_norm_tensor(const std::vector<Tensor>& params, double max_norm) {
  check_max_norm(max_norm);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    TG_CHECK(p.defined(), "clip_grad_norm: parameter {} is an undefined tensor", grads.size());
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return Tensor();
  // On a GPU: all gradients in three launches (kernels/cuda/clip_grad_norm.cu; g² summed in float64).
  if (Tensor n = clip_grad_norm_many_(grads, max_norm); n.defined()) return n;
  Tensor sum_sq;  // Σ g², a 0-d float64 tensor on the gradients' device
  for (const Tensor& g : grads) {
    const Tensor s = (g * g).sum().to(kFloat64);  // rounded to g's dtype first, as the CPU path does
    sum_sq = sum_sq.defined() ? sum_sq + s : s;
  }
  if (!sum_sq.defined()) return Tensor();
  const Tensor norm = sqrt(sum_sq);  // n = √(Σ g²)
  // scale = max_norm/(n + 1e-6) where max_norm < n < ∞, else exactly 1 (the gradients unchanged; n NaN or ∞ too)
  const Tensor one = ones_like(norm);
  const Tensor finite_scale = where(lt(norm, std::numeric_limits<double>::infinity()), max_norm / (norm + 1e-6), one);
  const Tensor scale = where(gt(norm, max_norm), finite_scale, one);
  for (Tensor& g : grads) g.mul_(scale.to(g.dtype()));
  return norm;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  if (!all_grads_on_cpu(params)) {
    const Tensor n = clip_grad_norm_tensor(params, max_norm);
    return n.defined() ? n.item<double>() : 0.0;
  }
  check_max_norm(max_norm);
  NoGradGuard no_grad;
  double sum_sq = 0.0;  // Σ g² over all gradients, accumulated in double
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    TG_CHECK(p.defined(), "clip_grad_norm: parameter {} is an undefined tensor", grads.size());
    Tensor g = p.grad();
    if (!g.defined()) continue;  // parameters without a gradient do not count
    sum_sq += (g * g).sum().item<double>();
    grads.push_back(g);
  }
  const double norm = std::sqrt(sum_sq);  // n = √(Σ g²)
  if (norm > max_norm && std::isfinite(norm)) {
    const double scale = max_norm / (norm + 1e-6);  // g ← g · max_norm/(n + 1e-6)
    for (Tensor& g : grads) g.mul_(scale);
  }
  return norm;
}

}  // namespace tapegrad::optim
