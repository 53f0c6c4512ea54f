// sgd.h — SGD with momentum and (L2) weight decay, with torch.optim.SGD's semantics
// (dampening 0, no Nesterov):
//   d   = g + λ·θ                       (weight decay folded into the gradient, when λ > 0)
//   buf = d                 first step   (when momentum μ > 0)
//   buf = μ·buf + d         later steps
//   θ  ← θ − lr·buf                      (θ − lr·d without momentum)
//
//   SGD opt(params, SGDOptions(0.1).momentum(0.9).weight_decay(1e-4));
// State per parameter (only with momentum): "momentum_buffer", created on the first update.
#pragma once
#include "optim/optimizer.h"

namespace tapegrad::optim {

struct SGDOptions {
  explicit SGDOptions(double lr) : lr_(lr) {}
  SGDOptions& lr(double v) { lr_ = v; return *this; }
  SGDOptions& momentum(double v) { momentum_ = v; return *this; }
  SGDOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  double lr_;
  double momentum_ = 0.0;
  double weight_decay_ = 0.0;
};

class SGD final : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  // Groups' unset lr / weight decay take options' values; momentum is shared by all groups.
  SGD(std::vector<ParamGroup> groups, SGDOptions options);

  void step() override;
  const SGDOptions& options() const { return options_; }
  std::map<std::string, double> fixed_hyperparameters() const override { return {{"momentum", options_.momentum_}}; }

 protected:
  std::vector<std::string> state_buffers() const override { return {"momentum_buffer"}; }
  void validate_state(size_t i, const Tensor& param, const std::map<std::string, Tensor>& state) const override;

 private:
  SGDOptions options_;
};

}  // namespace tapegrad::optim
