// train_recipe.cpp — the recipes of `train --recipe` (what each one is and why: train_recipe.h).
#include "lm/train_recipe.h"

#include "kernels/error.h"

namespace tapegrad::lm {

const TrainRecipe& train_recipe(const std::string& name) {
  using optim::OptimizerKind, optim::ScheduleKind;
  static const TrainRecipe classic{"classic", OptimizerKind::AdamW, ScheduleKind::Cosine, 1e-3, 0.1, 0.02, 0.2};
  static const TrainRecipe modern{"modern", OptimizerKind::Muon, ScheduleKind::Wsd, 6e-3, 0.0, 0.02, 0.4};
  if (name == "classic") return classic;
  if (name == "modern") return modern;
  throw Error(fmt::format("--recipe must be classic or modern, but is '{}'", name));
}

}  // namespace tapegrad::lm
