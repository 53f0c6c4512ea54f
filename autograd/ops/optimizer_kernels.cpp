// optimizer_kernels.cpp — in-place parameter updates for optim/, one fused kernel each; never recorded
// on the tape (an optimizer step is not differentiated). optim/ reaches the backend only through here.
#include <array>
#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops/op_util.h"

namespace tapegrad {

using detail::backend_of;
using detail::kview;

namespace {

// The checks of one parameter's update (op names the caller).
void check_adamw_tensors(const char* op, const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                         const Tensor& exp_avg_sq) {
  for (const Tensor* t : {&param, &grad, &exp_avg, &exp_avg_sq}) {
    detail::check_defined(op, *t);
    detail::check_same_device(op, param, *t);
    TG_CHECK(t->shape() == param.shape() && t->dtype() == param.dtype(),
             "{}: grad and state must match the parameter {} {}, got {} {}", op, param.dtype(), param.shape(),
             t->dtype(), t->shape());
  }
  detail::check_floating(op, param);
  for (const Tensor* t : {&param, &exp_avg, &exp_avg_sq})
    TG_CHECK(!(GradMode::enabled() && t->requires_grad()),
             "{}: in-place update of a tensor of shape {} that requires grad; run it under NoGradGuard", op,
             t->shape());
}

kernels::AdamWStep step_scalars(const char* op, const AdamWHyper& h, int64_t step) {
  TG_CHECK(step >= 1, "{}: step must be ≥ 1, got {}", op, step);
  const double t = static_cast<double>(step);
  return {h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, 1.0 - std::pow(h.beta1, t), 1.0 - std::pow(h.beta2, t)};
}

// The kernel views of (param, grad, exp_avg, exp_avg_sq) quadruples, each checked, all on the first one's device.
std::vector<kernels::AdamWTensors> adamw_views(const char* op, const std::vector<std::array<Tensor, 4>>& tensors) {
  std::vector<kernels::AdamWTensors> views;
  views.reserve(tensors.size());
  for (const auto& [param, grad, exp_avg, exp_avg_sq] : tensors) {
    check_adamw_tensors(op, param, grad, exp_avg, exp_avg_sq);
    detail::check_same_device(op, tensors.front()[0], param);
    views.push_back({kview(param), kview(grad), kview(exp_avg), kview(exp_avg_sq)});
  }
  return views;
}

// The update wrote param, exp_avg and exp_avg_sq in place.
void bump_adamw_versions(const std::vector<std::array<Tensor, 4>>& tensors) {
  for (const auto& t : tensors)
    for (int i : {0, 2, 3}) t[size_t(i)].storage()->bump_version();
}

}  // namespace

void adamw_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                   const AdamWHyper& h, int64_t step) {
  const char* op = "adamw_update_";
  check_adamw_tensors(op, param, grad, exp_avg, exp_avg_sq);
  const kernels::AdamWStep s = step_scalars(op, h, step);
  backend_of(param).adamw_update(kview(param), kview(grad), kview(exp_avg), kview(exp_avg_sq), s);
  for (const Tensor* x : {&param, &exp_avg, &exp_avg_sq}) x->storage()->bump_version();
}

void adamw_update_many_(const std::vector<std::array<Tensor, 4>>& tensors, const AdamWHyper& h, int64_t step) {
  const char* op = "adamw_update_many_";
  if (tensors.empty()) return;
  const std::vector<kernels::AdamWTensors> views = adamw_views(op, tensors);
  const kernels::AdamWStep s = step_scalars(op, h, step);
  backend_of(tensors.front()[0]).adamw_update_many(views, s);
  bump_adamw_versions(tensors);
}

Tensor adamw_step_scalars(const AdamWHyper& h, int64_t step) {
  const kernels::AdamWStep s = step_scalars("adamw_step_scalars", h, step);
  return tensor(std::vector<double>{s.lr, s.beta1, s.beta2, s.eps, s.weight_decay, s.bias_correction1,
                                    s.bias_correction2},
                kFloat64);
}

void adamw_update_many_from_device_(const std::vector<std::array<Tensor, 4>>& tensors, const Tensor& scalars) {
  const char* op = "adamw_update_many_from_device_";
  if (tensors.empty()) return;
  detail::check_defined(op, scalars);
  TG_CHECK(scalars.dtype() == kFloat64 && scalars.numel() == 7 && scalars.is_contiguous(),
           "{}: the step's scalars must be a contiguous float64 tensor of 7 elements (adamw_step_scalars), got {} {}",
           op, scalars.dtype(), scalars.shape());
  const std::vector<kernels::AdamWTensors> views = adamw_views(op, tensors);
  detail::check_same_device(op, tensors.front()[0], scalars);
  TG_CHECK(backend_of(tensors.front()[0]).adamw_update_many_from_device(views, kview(scalars)),
           "{}: the backend of {} has no AdamW kernel reading its scalars from device memory for these tensors "
           "(a GPU, contiguous float32/float64 tensors of one dtype)",
           op, tensors.front()[0].device().str());
  bump_adamw_versions(tensors);
}

Tensor clip_grad_norm_many_(const std::vector<Tensor>& grads, double max_norm) {
  const char* op = "clip_grad_norm_many_";
  if (grads.empty()) return Tensor();
  std::vector<kernels::TensorView> views;
  views.reserve(grads.size());
  for (const Tensor& g : grads) {
    detail::check_defined(op, g);
    detail::check_same_device(op, grads.front(), g);
    if (!g.is_contiguous() || g.dtype() != grads.front().dtype()) return Tensor();
    views.push_back(kview(g));
  }
  Tensor norm = empty({}, Options(kFloat64).device(grads.front().device()));
  if (!backend_of(grads.front()).clip_grad_norm_native(kview(norm), views, max_norm)) return Tensor();
  for (const Tensor& g : grads) g.storage()->bump_version();
  return norm;
}

}  // namespace tapegrad
