// train_recipe.cpp — the recipes of `train --recipe` (what each one is and why: train_recipe.h).
#include "lm/train_recipe.h"

#include "kernels/error.h"

namespace tapegrad::lm {

const TrainRecipe& train_recipe(const std::string& name) {
  using optim::OptimizerKind, optim::ScheduleKind;
  static const TrainRecipe classic{"classic", OptimizerKind::AdamW, ScheduleKind::Cosine, 1e-3, 0.1, 0.02, 0.2};
  static const TrainRecipe modern = [] {
    TrainRecipe r{"modern", OptimizerKind::Muon, ScheduleKind::Wsd, 6e-3, 0.0, 0.02, 0.4};
    r.qk_norm = true;  // the one architecture option that won in the race's ablation (docs/training.md)
    return r;
  }();
  if (name == "classic") return classic;
  if (name == "modern") return modern;
  throw Error(fmt::format("--recipe must be classic or modern, but is '{}'", name));
}

void apply_recipe_architecture(const TrainRecipe& r, nn::TransformerLMConfig& c) {
  c.ffn = r.ffn;
  c.qk_norm = r.qk_norm;
  c.norm_gain = r.norm_gain;
  c.embed_norm = r.embed_norm;
  c.zero_init_projections = r.zero_init_projections;
  c.logit_softcap = r.logit_softcap;
}

}  // namespace tapegrad::lm
