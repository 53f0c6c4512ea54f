// muon.cpp — Muon::step in torch.optim.Muon's order (formulas in muon.h, repeated next to the code).
#include "optim/muon.h"

#include <algorithm>
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "kernels/error.h"

namespace tapegrad::optim {

MuonLrAdjust parse_muon_lr_adjust(const std::string& name) {
  if (name == "original") return MuonLrAdjust::Original;
  if (name == "match_rms_adamw") return MuonLrAdjust::MatchRmsAdamW;
  if (name == "spectral_unclamped") return MuonLrAdjust::SpectralUnclamped;
  throw Error(fmt::format("Muon: the learning-rate adjustment must be original, match_rms_adamw or "
                          "spectral_unclamped, but is '{}'",
                          name));
}

const char* muon_lr_adjust_name(MuonLrAdjust adjust) {
  switch (adjust) {
    case MuonLrAdjust::Original: return "original";
    case MuonLrAdjust::MatchRmsAdamW: return "match_rms_adamw";
    case MuonLrAdjust::SpectralUnclamped: return "spectral_unclamped";
  }
  return "?";
}

double muon_adjusted_lr(double lr, MuonLrAdjust adjust, int64_t rows, int64_t cols) {
  const double a = double(rows), b = double(cols);
  switch (adjust) {
    case MuonLrAdjust::Original: return lr * std::sqrt(std::max(1.0, a / b));      // √max(1, A/B)
    case MuonLrAdjust::MatchRmsAdamW: return lr * (0.2 * std::sqrt(std::max(a, b)));  // 0.2·√max(A, B)
    case MuonLrAdjust::SpectralUnclamped: return lr * std::sqrt(a / b);             // √(A/B)
  }
  return lr;
}

namespace {

// torch.lerp(start, end, w) = start + w·(end − start), computed as torch does for accuracy: from `end`
// when w ≥ ½ (end − (end − start)·(1 − w)).
Tensor lerp(const Tensor& start, const Tensor& end, double w) {
  return w < 0.5 ? start + (end - start) * w : end - (end - start) * (1.0 - w);
}

}  // namespace

Muon::Muon(std::vector<Tensor> params, MuonOptions options) : Muon(single_group(std::move(params)), options) {}

Muon::Muon(std::vector<ParamGroup> groups, MuonOptions options)
    : Optimizer("Muon", std::move(groups), options.lr_, options.weight_decay_), options_(options) {
  check_nonnegative("Muon", "momentum", options.momentum_);
  TG_CHECK(options.momentum_ < 1.0, "Muon: momentum must be < 1, but is {}", options.momentum_);
  check_nonnegative("Muon", "eps", options.eps_);
  TG_CHECK(options.ns_steps_ >= 0 && options.ns_steps_ < 100, "Muon: ns_steps must be in [0, 100), but is {}",
           options.ns_steps_);
  size_t i = 0;
  for (const ParamGroup& g : param_groups())
    for (const Tensor& p : g.params) {
      TG_CHECK(p.dim() == 2,
               "Muon: parameter {}{} has shape {}; Muon updates 2-D weight matrices only (give embeddings, biases "
               "and norm gains to AdamW)",
               i, p.name().empty() ? "" : fmt::format(" ('{}')", p.name()), p.shape());
      ++i;
    }
}

std::map<std::string, double> Muon::fixed_hyperparameters() const {
  const auto& o = options_;
  return {{"momentum", o.momentum_},
          {"nesterov", o.nesterov_ ? 1.0 : 0.0},
          {"ns_a", o.ns_coefficients_[0]},
          {"ns_b", o.ns_coefficients_[1]},
          {"ns_c", o.ns_coefficients_[2]},
          {"ns_steps", double(o.ns_steps_)},
          {"eps", o.eps_},
          {"adjust_lr", double(static_cast<int>(o.adjust_lr_))}};
}

void Muon::step() {
  NoGradGuard no_grad;  // in-place updates of tensors that require grad
  const MuonOptions& o = options_;
  const double mu = o.momentum_;
  struct Update {
    Tensor param;
    double lr, weight_decay;
  };
  std::vector<Update> updates;
  std::vector<Tensor> directions;  // u of every parameter with a gradient, orthogonalised together below
  for_each_param_with_grad([&](size_t i, Tensor& p, const Tensor& g, const ParamGroup& group) {
    auto& st = param_state(i);
    auto it = st.find("momentum_buffer");
    if (it == st.end()) it = st.emplace("momentum_buffer", zeros_like(p)).first;
    Tensor& buf = it->second;
    buf.copy_(lerp(buf, g, 1.0 - mu));                            // buf ← lerp(buf, g, 1 − μ)
    directions.push_back(o.nesterov_ ? lerp(g, buf, mu) : buf);  // u ← lerp(g, buf, μ)  |  buf
    updates.push_back({p, *group.lr, *group.weight_decay});
  });
  // O = NS(u) of every matrix: those of one shape iterate as one batch (newton_schulz.h).
  const std::vector<Tensor> O =
      newton_schulz_orthogonalize_many(directions, o.ns_coefficients_, o.ns_steps_, o.eps_, o.ns_dtype_, o.ns_form_);
  for (size_t k = 0; k < updates.size(); ++k) {
    Tensor& p = updates[k].param;
    const double lr = updates[k].lr, wd = updates[k].weight_decay;
    const double adjusted = muon_adjusted_lr(lr, o.adjust_lr_, p.shape()[0], p.shape()[1]);
    if (lr * wd != 0.0) p.mul_(1.0 - lr * wd);                                // θ ← θ·(1 − lr·λ)
    p.add_(O[k].dtype() == p.dtype() ? O[k] : O[k].to(p.dtype()), -adjusted);  // θ ← θ − lr'·O
  }
}

void Muon::validate_state(size_t i, const Tensor& param, const std::map<std::string, Tensor>& state) const {
  auto it = state.find("momentum_buffer");
  if (it == state.end()) return;
  TG_CHECK(it->second.shape() == param.shape() && it->second.dtype() == param.dtype(),
           "Muon: load_state: momentum_buffer of parameter {} is {} {} but the parameter is {} {}", i,
           it->second.shape(), it->second.dtype(), param.shape(), param.dtype());
}

}  // namespace tapegrad::optim
