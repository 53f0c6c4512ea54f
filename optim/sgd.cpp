// sgd.cpp — SGD::step (formulas in sgd.h, repeated next to the code).
#include "optim/sgd.h"

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "kernels/error.h"

namespace tapegrad::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : SGD(single_group(std::move(params)), options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer("SGD", std::move(groups), options.lr_, options.weight_decay_), options_(options) {
  check_nonnegative("SGD", "momentum", options.momentum_);
}

void SGD::step() {
  NoGradGuard no_grad;  // in-place updates of tensors that require grad
  const double mu = options_.momentum_;
  for_each_param_with_grad([&](size_t i, Tensor& p, const Tensor& g, const ParamGroup& group) {
    const double lr = *group.lr, wd = *group.weight_decay;
    Tensor d = g;
    if (wd != 0.0) d = g + p * wd;  // d = g + λ·θ
    if (mu != 0.0) {
      auto& st = param_state(i);
      auto it = st.find("momentum_buffer");
      if (it == st.end()) {
        it = st.emplace("momentum_buffer", d.clone()).first;  // first step: buf = d
      } else {
        it->second.mul_(mu).add_(d);  // buf = μ·buf + d
      }
      d = it->second;
    }
    p.add_(d, -lr);  // θ ← θ − lr·d
  });
}

void SGD::validate_state(size_t i, const Tensor& param, const std::map<std::string, Tensor>& state) const {
  auto it = state.find("momentum_buffer");
  if (it == state.end()) return;
  TG_CHECK(options_.momentum_ != 0.0, "SGD: load_state: parameter {} has a momentum buffer but momentum is 0", i);
  TG_CHECK(it->second.shape() == param.shape() && it->second.dtype() == param.dtype(),
           "SGD: load_state: momentum_buffer of parameter {} is {} {} but the parameter is {} {}", i,
           it->second.shape(), it->second.dtype(), param.shape(), param.dtype());
}

}  // namespace tapegrad::optim
