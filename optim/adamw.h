// adamw.h — AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization"), behaving exactly
// like torch.optim.AdamW (amsgrad off, maximize off). Per parameter θ with gradient g, step t = 1, 2, …:
//   θ ← θ·(1 − lr·λ)                          decoupled weight decay, applied FIRST
//   m ← β1·m + (1 − β1)·g                     first moment
//   v ← β2·v + (1 − β2)·g²                    second moment
//   θ ← θ − lr/(1 − β1^t) · m / (√v/√(1 − β2^t) + ε)
//
// The order — decay before the Adam update, so the decay uses θ before this step's Adam change —
// is torch's: torch/optim/adamw.py (_single_tensor_adamw, torch 1.13) does `param.mul_(1 - lr *
// weight_decay)` and only then updates exp_avg / exp_avg_sq and calls `param.addcdiv_`. The CS336
// 26.x AdamW snapshot matches this order; its 1.0.x snapshot applied the decay after the Adam step.
//
//   AdamW opt(params, AdamWOptions(3e-4).betas(0.9, 0.95).weight_decay(0.1));
// Defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01 (torch's).
// State per parameter, created on its first update: "step" (0-d float64: updates so far),
// "exp_avg" (m) and "exp_avg_sq" (v), both of the parameter's shape and dtype (float32 or float64).
#pragma once
#include "optim/optimizer.h"

namespace tapegrad::optim {

struct AdamWOptions {
  explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  AdamWOptions& lr(double v) { lr_ = v; return *this; }
  AdamWOptions& betas(double b1, double b2) { beta1_ = b1; beta2_ = b2; return *this; }
  AdamWOptions& eps(double v) { eps_ = v; return *this; }
  AdamWOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  double lr_;
  double beta1_ = 0.9;
  double beta2_ = 0.999;
  double eps_ = 1e-8;
  double weight_decay_ = 0.01;
};

class AdamW final : public Optimizer {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = AdamWOptions());
  // Groups' unset lr / weight decay take options' values; betas and eps are shared by all groups.
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options = AdamWOptions());

  // One update of every parameter with a gradient: one fused kernel per parameter (adamw_update_).
  void step() override;
  // The same update composed of tensor ops (mul_, add_, sqrt, /): step()'s test oracle.
  void step_reference();
  const AdamWOptions& options() const { return options_; }
  std::map<std::string, double> fixed_hyperparameters() const override {
    return {{"beta1", options_.beta1_}, {"beta2", options_.beta2_}, {"eps", options_.eps_}};
  }

 protected:
  std::vector<std::string> state_buffers() const override { return {"step", "exp_avg", "exp_avg_sq"}; }
  void validate_state(size_t i, const Tensor& param, const std::map<std::string, Tensor>& state) const override;

 private:
  void update(bool fused);
  AdamWOptions options_;
};

}  // namespace tapegrad::optim
