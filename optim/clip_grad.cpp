// clip_grad.cpp — clip_grad_norm (formula in clip_grad.h, repeated next to the code).
#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "kernels/error.h"

namespace tapegrad::optim {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  TG_CHECK(std::isfinite(max_norm) && max_norm >= 0.0, "clip_grad_norm: max_norm must be finite and >= 0, but is {}",
           max_norm);
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
  if (norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);  // g ← g · max_norm/(n + 1e-6)
    for (Tensor& g : grads) g.mul_(scale);
  }
  return norm;
}

}  // namespace tapegrad::optim
