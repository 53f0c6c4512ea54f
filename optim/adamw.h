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
//
// A step in two halves, for a step captured in a CUDA graph (lm/trainer.cpp, `train --cuda-graph on`):
// prepare_device_step() then step_from_device() is step(), bit for bit. The host half advances the step
// counters and writes each run's scalars (lr, t, …) into a device tensor the optimizer keeps; the device
// half queues the kernels, which read those tensors when they run — so it can be captured once and
// replayed after each prepare_device_step().
#pragma once
#include <array>
#include <cstdint>

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
  // The host half of step(): creates missing state, advances every step counter (t ← t + 1), groups the
  // parameters into runs that share lr, weight decay, t and device (as step() does) and copies each run's
  // scalars (adamw_step_scalars) into a float64 [7] tensor on its device, kept from one call to the next
  // while the runs stay the same (device_runs_version() counts the changes).
  void prepare_device_step() override;
  // The device half: one adamw_update_many_from_device_ per run of the last prepare_device_step(), reading
  // the scalars it wrote. Throws before any prepare_device_step().
  void step_from_device() override;
  bool has_device_step() const override { return true; }
  // Changes whenever prepare_device_step() made new runs (other parameters, groups, devices): a graph that
  // captured step_from_device() is valid only while this stays what it was then.
  uint64_t device_runs_version() const override { return device_runs_version_; }
  const AdamWOptions& options() const { return options_; }
  std::map<std::string, double> fixed_hyperparameters() const override {
    return {{"beta1", options_.beta1_}, {"beta2", options_.beta2_}, {"eps", options_.eps_}};
  }

 protected:
  std::vector<std::string> state_buffers() const override { return {"step", "exp_avg", "exp_avg_sq"}; }
  void validate_state(size_t i, const Tensor& param, const std::map<std::string, Tensor>& state) const override;

 private:
  // Parameters updated by one kernel: they share lr, weight decay, step and device.
  struct Run {
    double lr, weight_decay;
    int64_t t;
    Device device;
    std::vector<size_t> params;                    // their indices
    std::vector<std::array<Tensor, 4>> tensors;    // {param, grad, exp_avg, exp_avg_sq} each
  };
  void update(bool fused);
  // Creates missing state, advances the step counters and groups the parameters with a gradient into runs.
  std::vector<Run> advance_into_runs();
  AdamWOptions options_;
  std::vector<Run> device_runs_;              // of the last prepare_device_step()
  std::vector<Tensor> device_run_scalars_;    // one float64 [7] tensor per run, on its device
  uint64_t device_runs_version_ = 0;
};

}  // namespace tapegrad::optim
