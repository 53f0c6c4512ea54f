// adamw.cpp — AdamW::step, in torch.optim.AdamW's order (formulas in adamw.h, repeated below).
#include "optim/adamw.h"

#include <array>
#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/ops_from_table.h"
#include "kernels/error.h"

namespace tapegrad::optim {

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : AdamW(single_group(std::move(params)), options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Optimizer("AdamW", std::move(groups), options.lr_, options.weight_decay_), options_(options) {
  check_beta("AdamW", "beta1", options.beta1_);
  check_beta("AdamW", "beta2", options.beta2_);
  check_nonnegative("AdamW", "eps", options.eps_);
}

void AdamW::step() { update(/*fused=*/true); }
void AdamW::step_reference() { update(/*fused=*/false); }

std::vector<AdamW::Run> AdamW::advance_into_runs() {
  std::vector<Run> runs;
  for_each_param_with_grad([&](size_t i, Tensor& p, const Tensor& g, const ParamGroup& group) {
    const double lr = *group.lr, wd = *group.weight_decay;
    auto& st = param_state(i);
    if (st.empty()) {  // lazily created on the first update
      st.emplace("step", scalar_tensor(0.0, kFloat64));
      st.emplace("exp_avg", zeros_like(p));
      st.emplace("exp_avg_sq", zeros_like(p));
    }
    Tensor& step_t = st.at("step");
    step_t.add_(1.0);  // t ← t + 1
    const auto t = static_cast<int64_t>(step_t.item<double>());
    if (runs.empty() || runs.back().lr != lr || runs.back().weight_decay != wd || runs.back().t != t ||
        runs.back().device != p.device())
      runs.push_back({lr, wd, t, p.device(), {}, {}});
    runs.back().params.push_back(i);
    runs.back().tensors.push_back({p, g, st.at("exp_avg"), st.at("exp_avg_sq")});
  });
  return runs;
}

void AdamW::update(bool fused) {
  NoGradGuard no_grad;  // in-place updates of tensors that require grad
  const double b1 = options_.beta1_, b2 = options_.beta2_, eps = options_.eps_;
  // Fused: parameters are gathered into runs that share lr, weight decay, step and device, and each
  // run is one adamw_update_many_ (one launch on a GPU; the same bits as one update each).
  if (fused) {
    for (const Run& r : advance_into_runs())
      adamw_update_many_(r.tensors, AdamWHyper{r.lr, b1, b2, eps, r.weight_decay}, r.t);
    return;
  }
  std::vector<Run> runs = advance_into_runs();
  for (Run& r : runs) {
    const double lr = r.lr, wd = r.weight_decay, t = static_cast<double>(r.t);
    for (auto& [p, g, m, v] : r.tensors) {
      if (lr * wd != 0.0) p.mul_(1.0 - lr * wd);  // θ ← θ·(1 − lr·λ)   (decay first, as torch)
      m.mul_(b1).add_(g, 1.0 - b1);               // m ← β1·m + (1 − β1)·g
      v.mul_(b2).add_(g * g, 1.0 - b2);           // v ← β2·v + (1 − β2)·g²
      const double bias_correction1 = 1.0 - std::pow(b1, t);  // 1 − β1^t
      const double bias_correction2 = 1.0 - std::pow(b2, t);  // 1 − β2^t
      const double step_size = lr / bias_correction1;
      Tensor denom = sqrt(v) / std::sqrt(bias_correction2) + eps;  // √v/√(1 − β2^t) + ε
      p.add_(m / denom, -step_size);                               // θ ← θ − lr/(1 − β1^t) · m / denom
    }
  }
}

void AdamW::prepare_device_step() {
  NoGradGuard no_grad;
  std::vector<Run> runs = advance_into_runs();
  // The same runs as last time (parameters, lr/decay grouping, devices): keep the scalar tensors, so a
  // captured step_from_device() reads this step's values from where it read them at capture.
  bool same = runs.size() == device_runs_.size();
  for (size_t r = 0; same && r < runs.size(); ++r)
    same = runs[r].params == device_runs_[r].params && runs[r].device == device_runs_[r].device;
  if (!same) {
    device_run_scalars_.clear();
    for (const Run& r : runs)
      device_run_scalars_.push_back(zeros({7}, Options(kFloat64).device(r.device)));
    ++device_runs_version_;
  }
  const double b1 = options_.beta1_, b2 = options_.beta2_, eps = options_.eps_;
  for (size_t r = 0; r < runs.size(); ++r)
    device_run_scalars_[r].copy_(
        adamw_step_scalars(AdamWHyper{runs[r].lr, b1, b2, eps, runs[r].weight_decay}, runs[r].t));
  device_runs_ = std::move(runs);
}

void AdamW::step_from_device() {
  TG_CHECK(device_runs_version_ > 0, "AdamW: step_from_device() before prepare_device_step()");
  NoGradGuard no_grad;
  for (size_t r = 0; r < device_runs_.size(); ++r)
    adamw_update_many_from_device_(device_runs_[r].tensors, device_run_scalars_[r]);
}

void AdamW::validate_state(size_t i, const Tensor& param, const std::map<std::string, Tensor>& state) const {
  if (state.empty()) return;
  for (const char* b : {"step", "exp_avg", "exp_avg_sq"})
    TG_CHECK(state.contains(b), "AdamW: load_state: parameter {} has some state but no '{}'", i, b);
  const Tensor& step_t = state.at("step");
  TG_CHECK(step_t.numel() == 1 && step_t.dim() == 0 && step_t.dtype() == kFloat64,
           "AdamW: load_state: 'step' of parameter {} must be a 0-d float64 tensor, but is {} {}", i, step_t.shape(),
           step_t.dtype());
  const double t = step_t.item<double>();
  TG_CHECK(t >= 1.0 && t == std::floor(t), "AdamW: load_state: 'step' of parameter {} must be an integer >= 1, but is {}",
           i, t);
  for (const char* b : {"exp_avg", "exp_avg_sq"}) {
    const Tensor& s = state.at(b);
    TG_CHECK(s.shape() == param.shape() && s.dtype() == param.dtype(),
             "AdamW: load_state: '{}' of parameter {} is {} {} but the parameter is {} {}", b, i, s.shape(), s.dtype(),
             param.shape(), param.dtype());
  }
}

}  // namespace tapegrad::optim
