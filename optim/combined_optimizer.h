// combined_optimizer.h — several optimizers over disjoint parameters, driven as one: the shape of
// "Muon for the hidden weight matrices, AdamW for the rest" (Keller Jordan's MuonWithAuxAdam, nanochat,
// modded-nanogpt), so that a training loop, a checkpoint and a schedule see one Optimizer.
//
//   CombinedOptimizer opt(parts);   // parts: {Muon over the block matrices, AdamW over the rest}
//
// Its groups are the parts' groups in order (part 0's first); its parameters and their flat indices
// follow (so state names "<i>.<buffer>" count through all parts). kind() joins the parts' kinds
// ("Muon+AdamW"); fixed_hyperparameters() holds each part's under "<part kind, lower case>." ("muon.momentum",
// "adamw.beta1"). Learning rates and weight decays live in its own groups (set_lr, set_lr_relative, a
// checkpoint's restore) and are handed to the parts at every step(). state() / load_state() translate the
// indices; load_state() is all or nothing (a part that refuses puts the parts before it back).
// A combined optimizer has no device step: a captured training step runs it eagerly (optimizer.h).
#pragma once
#include <memory>
#include <vector>

#include "optim/optimizer.h"

namespace tapegrad::optim {

class CombinedOptimizer final : public Optimizer {
 public:
  // At least one part; no parameter in two parts (tapegrad::Error otherwise).
  explicit CombinedOptimizer(std::vector<std::unique_ptr<Optimizer>> parts);

  void step() override;
  std::map<std::string, double> fixed_hyperparameters() const override;
  StateList state_view() const override;
  void load_state(const StateList& state) override;

  size_t num_parts() const { return parts_.size(); }
  const Optimizer& part(size_t i) const { return *parts_.at(i); }

 protected:
  // Unused: state_view() and load_state() go to the parts, which check their own buffers.
  std::vector<std::string> state_buffers() const override { return {}; }
  void validate_state(size_t, const Tensor&, const std::map<std::string, Tensor>&) const override {}

 private:
  struct Span {
    size_t first_group, first_param;  // this part's first group / parameter in the combined numbering
  };
  std::vector<std::unique_ptr<Optimizer>> parts_;
  std::vector<Span> spans_;
};

}  // namespace tapegrad::optim
