// optimizer.cpp — Optimizer base: parameter checks, groups, zero_grad, lr access, state save/restore.
#include "optim/optimizer.h"

#include <cmath>
#include <set>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "kernels/error.h"

namespace tapegrad::optim {

void check_lr(const std::string& who, double lr) {
  TG_CHECK(std::isfinite(lr) && lr >= 0.0, "{}: learning rate must be finite and >= 0, but is {}", who, lr);
}

bool split_state_name(const std::string& name, size_t& index, std::string& buffer) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos || dot == 0 || dot > 18) return false;
  index = 0;
  for (size_t k = 0; k < dot; ++k) {
    if (name[k] < '0' || name[k] > '9') return false;
    index = index * 10 + static_cast<size_t>(name[k] - '0');
  }
  buffer = name.substr(dot + 1);
  return true;
}

std::vector<ParamGroup> single_group(std::vector<Tensor> params) {
  std::vector<ParamGroup> groups;
  groups.emplace_back(std::move(params));
  return groups;
}

void check_nonnegative(const std::string& who, const char* what, double value) {
  TG_CHECK(std::isfinite(value) && value >= 0.0, "{}: {} must be finite and >= 0, but is {}", who, what, value);
}

void check_beta(const std::string& who, const char* what, double beta) {
  TG_CHECK(beta >= 0.0 && beta < 1.0, "{}: {} must be in [0, 1), but is {}", who, what, beta);
}

Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups, double default_lr,
                     double default_weight_decay)
    : name_(std::move(name)), groups_(std::move(groups)) {
  check_lr(name_, default_lr);
  check_nonnegative(name_, "weight_decay", default_weight_decay);
  std::set<const TensorImpl*> seen;
  size_t i = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    ParamGroup& g = groups_[gi];
    if (!g.lr) g.lr = default_lr;
    if (!g.weight_decay) g.weight_decay = default_weight_decay;
    check_lr(fmt::format("{} (group {})", name_, gi), *g.lr);
    check_nonnegative(fmt::format("{} (group {})", name_, gi), "weight_decay", *g.weight_decay);
    for (const Tensor& p : g.params) {
      TG_CHECK(p.defined(), "{}: parameter {} (group {}) is an undefined tensor", name_, i, gi);
      const std::string label = p.name().empty() ? fmt::format("parameter {}", i)
                                                 : fmt::format("parameter {} ('{}')", i, p.name());
      TG_CHECK(p.dtype() == kFloat32 || p.dtype() == kFloat64,
               "{}: {} has dtype {}; only float32 and float64 parameters can be optimized", name_, label,
               p.dtype());
      TG_CHECK(p.requires_grad(), "{}: {} does not require grad; call requires_grad_() on it or leave it out",
               name_, label);
      TG_CHECK(p.is_leaf(),
               "{}: {} is not a leaf (it was computed by an op on the tape); optimize the leaf it came "
               "from, or detach() it and call requires_grad_()",
               name_, label);
      TG_CHECK(seen.insert(p.impl().get()).second, "{}: {} appears more than once in the parameter list", name_,
               label);
      ++i;
    }
  }
  TG_CHECK(i > 0, "{}: got an empty parameter list", name_);
  state_.resize(i);
  for (const ParamGroup& g : groups_) initial_lr_.push_back(*g.lr);
}

void Optimizer::zero_grad() {
  for (ParamGroup& g : groups_)
    for (Tensor& p : g.params) p.zero_grad();
}

double Optimizer::lr(size_t group) const {
  TG_CHECK(group < groups_.size(), "{}: lr: group {} out of range ({} groups)", name_, group, groups_.size());
  return *groups_[group].lr;
}

void Optimizer::set_lr(double lr) {
  check_lr(name_, lr);
  for (ParamGroup& g : groups_) g.lr = lr;
}

void Optimizer::set_lr(size_t group, double lr) {
  TG_CHECK(group < groups_.size(), "{}: set_lr: group {} out of range ({} groups)", name_, group, groups_.size());
  check_lr(name_, lr);
  groups_[group].lr = lr;
}

double Optimizer::initial_lr(size_t group) const {
  TG_CHECK(group < groups_.size(), "{}: initial_lr: group {} out of range ({} groups)", name_, group, groups_.size());
  return initial_lr_[group];
}

void Optimizer::set_lr_relative(double lr, double reference_lr) {
  check_lr(name_, lr);
  TG_CHECK(std::isfinite(reference_lr) && reference_lr > 0,
           "{}: set_lr_relative: the reference lr must be > 0, but is {}", name_, reference_lr);
  for (size_t g = 0; g < groups_.size(); ++g)  // lr·initial/reference, exactly lr for the reference's own groups
    groups_[g].lr = initial_lr_[g] == reference_lr ? lr : lr * (initial_lr_[g] / reference_lr);
}

void Optimizer::prepare_device_step() {
  throw Error(fmt::format("{}: this optimizer has no device step (has_device_step() is false)", name_));
}

void Optimizer::step_from_device() {
  throw Error(fmt::format("{}: this optimizer has no device step (has_device_step() is false)", name_));
}

double Optimizer::weight_decay(size_t group) const {
  TG_CHECK(group < groups_.size(), "{}: weight_decay: group {} out of range ({} groups)", name_, group,
           groups_.size());
  return *groups_[group].weight_decay;
}

void Optimizer::set_weight_decay(size_t group, double weight_decay) {
  TG_CHECK(group < groups_.size(), "{}: set_weight_decay: group {} out of range ({} groups)", name_, group,
           groups_.size());
  check_nonnegative(name_, "weight_decay", weight_decay);
  groups_[group].weight_decay = weight_decay;
}

std::vector<Tensor> Optimizer::params() const {
  std::vector<Tensor> out;
  for (const ParamGroup& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

void Optimizer::check_grad(size_t i, const Tensor& p, const Tensor& grad) const {
  TG_CHECK(grad.shape() == p.shape() && grad.dtype() == p.dtype() && grad.device() == p.device(),
           "{}: the gradient of parameter {} is {} {} on {} but the parameter is {} {} on {}", name_, i, grad.shape(),
           grad.dtype(), grad.device(), p.shape(), p.dtype(), p.device());
}

StateList Optimizer::state_view() const {
  StateList out;
  const std::vector<std::string> buffers = state_buffers();
  for (size_t i = 0; i < state_.size(); ++i) {
    for (const std::string& b : buffers) {
      auto it = state_[i].find(b);
      if (it != state_[i].end()) out.emplace_back(fmt::format("{}.{}", i, b), it->second);
    }
  }
  return out;
}

StateList Optimizer::state() const {
  StateList out = state_view();
  for (auto& [name, t] : out) t = t.clone();
  return out;
}

void Optimizer::load_state(const StateList& state) {
  const std::vector<Tensor> ps = params();
  const std::vector<std::string> buffers = state_buffers();
  std::vector<std::map<std::string, Tensor>> fresh(state_.size());
  for (const auto& [key, value] : state) {
    const size_t dot = key.find('.');
    TG_CHECK(dot != std::string::npos && dot > 0, "{}: load_state: bad state name '{}' (expected '<index>.<buffer>')",
             name_, key);
    size_t i = 0;
    std::string buffer;
    TG_CHECK(split_state_name(key, i, buffer), "{}: load_state: bad parameter index in '{}' ({} parameters)", name_,
             key, ps.size());
    TG_CHECK(i < ps.size(), "{}: load_state: '{}' names parameter {} but there are {} parameters", name_, key, i,
             ps.size());
    bool known = false;
    for (const std::string& b : buffers) known = known || b == buffer;
    TG_CHECK(known, "{}: load_state: unknown state buffer '{}' in '{}'", name_, buffer, key);
    TG_CHECK(value.defined(), "{}: load_state: '{}' is an undefined tensor", name_, key);
    TG_CHECK(!fresh[i].contains(buffer), "{}: load_state: '{}' given twice", name_, key);
    // Buffers shaped like the parameter (moments) live on its device; the rest (step counters) on
    // the host, where reading them costs no device synchronisation.
    const Device home = value.shape() == ps[i].shape() ? ps[i].device() : Device::cpu();
    fresh[i][buffer] = value.device() == home ? value.detach().clone() : value.detach().to(home);
  }
  // The kind-specific layout (shapes, dtypes, which buffers go together) is checked by the subclass.
  for (size_t i = 0; i < fresh.size(); ++i) validate_state(i, ps[i], fresh[i]);
  state_ = std::move(fresh);
}

}  // namespace tapegrad::optim
