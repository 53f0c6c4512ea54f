// model_io.h — a trained model and its tokenizer back from a checkpoint (eval, info, generation).
//
//   optim::Checkpoint ck = optim::read_checkpoint(path);
//   auto model = lm::model_from_checkpoint(ck, path);                 // config + weights
//   data::BpeModel tok = lm::tokenizer_for_checkpoint(ck, path, "");  // the run's tokenizer.json
#pragma once
#include <memory>
#include <string>

#include "data/bpe_model.h"
#include "nn/transformer_lm.h"
#include "optim/checkpoint.h"

namespace tapegrad::lm {

// Builds the TransformerLM of the checkpoint's config and loads its weights (strict). A config that would
// allocate more than the checkpoint's weights justify is refused first (lm/model_budget.h).
std::unique_ptr<nn::TransformerLM> model_from_checkpoint(const optim::Checkpoint& ck, const std::string& path);

// The tokenizer to use with a checkpoint: `override_path` when given (a tokenizer.json or a folder,
// data::load_tokenizer_model), else the run directory's tokenizer.json next to checkpoints/. Refused
// with tapegrad::Error when the checkpoint records a tokenizer fingerprint that differs, when there is
// no tokenizer to be found, or when its vocabulary is larger than the model's.
data::BpeModel tokenizer_for_checkpoint(const optim::Checkpoint& ck, const std::string& path,
                                        const std::string& override_path);

// Writes `model` as the checkpoint of a run at step 0 (a fresh AdamW record, a default generator, the
// model's config, `extra` metadata): what an imported model is, so that eval, generate, info and export
// take it like any other checkpoint. `train --init-from` starts a new run from its weights (Trainer::init_from);
// `train --resume` refuses it on purpose (lm/trainer.cpp): an import has no training run to continue — its
// optimizer state and step are placeholders.
void save_model_checkpoint(nn::TransformerLM& model, const std::string& path, const optim::ConfigMap& extra);

// The number of scalar parameters a checkpoint's model holds (every model tensor).
int64_t checkpoint_parameter_count(const optim::Checkpoint& ck);

}  // namespace tapegrad::lm
