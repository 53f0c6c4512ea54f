// lm_optimizer.cpp — make_lm_optimizer: which parameter goes to which update rule (see the header).
#include "optim/lm_optimizer.h"

#include "kernels/error.h"
#include "optim/combined_optimizer.h"

namespace tapegrad::optim {

OptimizerKind parse_optimizer_kind(const std::string& name) {
  if (name == "adamw") return OptimizerKind::AdamW;
  if (name == "muon") return OptimizerKind::Muon;
  throw Error(fmt::format("--optimizer must be adamw or muon, but is '{}'", name));
}

const char* optimizer_kind_name(OptimizerKind kind) { return kind == OptimizerKind::Muon ? "muon" : "adamw"; }

std::unique_ptr<Optimizer> make_lm_optimizer(const std::vector<NamedParameter>& params,
                                             const LmOptimizerSettings& settings) {
  const bool muon = settings.kind == OptimizerKind::Muon;
  std::vector<Tensor> hidden, matrices, vectors;
  for (const NamedParameter& p : params) {
    if (muon && p.hidden_matrix && p.tensor.dim() == 2) hidden.push_back(p.tensor);
    else (p.tensor.dim() >= 2 ? matrices : vectors).push_back(p.tensor);
  }
  std::vector<ParamGroup> adamw_groups;
  if (!matrices.empty()) adamw_groups.push_back(ParamGroup(std::move(matrices)));  // weight decay: the options'
  if (!vectors.empty()) {
    ParamGroup no_decay(std::move(vectors));
    no_decay.weight_decay = 0.0;
    adamw_groups.push_back(std::move(no_decay));
  }
  if (hidden.empty()) return std::make_unique<AdamW>(std::move(adamw_groups), settings.adamw);
  std::vector<std::unique_ptr<Optimizer>> parts;
  parts.push_back(std::make_unique<Muon>(std::move(hidden), settings.muon));
  if (!adamw_groups.empty()) parts.push_back(std::make_unique<AdamW>(std::move(adamw_groups), settings.adamw));
  return std::make_unique<CombinedOptimizer>(std::move(parts));
}

}  // namespace tapegrad::optim
