// train_recipe.h — `train --recipe classic|modern`: the training defaults a user gets with one flag. Every
// field is only a default: a flag given explicitly (--optimizer, --schedule, --lr, --muon-lr, --min-lr,
// --decay-fraction) wins. On --resume the run's own recipe (recorded as run.recipe) applies unless
// --recipe is given.
//   classic  AdamW at --lr 1e-3, the cosine to lr/10 (CS336's recipe; tapegrad's defaults before recipes)
//   modern   Muon for the blocks' matrices (lr 0.02) and AdamW for the rest at 6e-3, warmup–stable–decay
//            over the last 40 % to 0, and a new model gets QK-norm — what the race against nanoGPT measured
//            best (docs/training.md, "The race")
#pragma once
#include <string>

#include "nn/transformer_lm.h"
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
  // The architecture of a new model (--init-from and --resume keep the checkpoint's): the modern options of
  // nn::TransformerLMConfig, each overridden by its own flag (--ffn, --qk-norm, …).
  nn::FFNKind ffn = nn::FFNKind::SwiGLU;
  bool qk_norm = false, norm_gain = true, embed_norm = false, zero_init_projections = false;
  double logit_softcap = 0;
};

// The recipe's architecture options written into `config` (its shape fields are left alone).
void apply_recipe_architecture(const TrainRecipe& recipe, nn::TransformerLMConfig& config);

// "classic" / "modern"; anything else: tapegrad::Error naming --recipe.
const TrainRecipe& train_recipe(const std::string& name);

}  // namespace tapegrad::lm
