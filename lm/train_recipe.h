// train_recipe.h — `train --recipe classic|modern`: the training defaults a user gets with one flag. Every
// field is only a default: a flag given explicitly (--optimizer, --schedule, --lr, --muon-lr, --min-lr,
// --decay-fraction) wins. On --resume the run's own recipe (recorded as run.recipe) applies unless
// --recipe is given.
//   classic  AdamW at --lr 1e-3, the cosine to lr/10 (CS336's recipe; tapegrad's defaults before recipes)
//   modern   Muon for the blocks' matrices (lr 0.02) and AdamW for the rest at 6e-3, warmup–stable–decay
//            over the last 40 % to 0 — what the race against nanoGPT measured best (docs/training.md, "The race")
#pragma once
#include <string>

#include "optim/lm_optimizer.h"
#include "optim/lr_schedule.h"

namespace tapegrad::lm {

struct TrainRecipe {
  std::string name;
  optim::OptimizerKind optimizer;
  optim::ScheduleKind schedule;
  double lr;              // AdamW's peak (--lr)
  double min_lr_ratio;    // --min-lr = lr·ratio
  double muon_lr;         // Muon's peak (--muon-lr)
  double decay_fraction;  // --decay-fraction (WSD)
};

// "classic" / "modern"; anything else: tapegrad::Error naming --recipe.
const TrainRecipe& train_recipe(const std::string& name);

}  // namespace tapegrad::lm
