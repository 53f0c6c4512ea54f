// config_json.h — a run directory's config.json: the model config, the training options and the run's provenance,
// as a person and a script read them. Checkpoints store every value as an exact string (optim/checkpoint.h); here
// the model's and training's numbers become JSON numbers and "true"/"false" booleans ("lr": 0.006, "qk_norm": true),
// while "run" (paths, names, fingerprints) and the text options (out_dir, device, …) stay strings.
//   {"model": {"vocab_size": 2048, …}, "train": {"lr": 0.003, "optimizer": "muon", …}, "run": {…}, "parameters": N}
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace tapegrad::lm {

std::string run_config_json(const std::map<std::string, std::string>& model,
                            const std::map<std::string, std::string>& train,
                            const std::map<std::string, std::string>& run, int64_t parameters);

}  // namespace tapegrad::lm
