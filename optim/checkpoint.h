// checkpoint.h — training checkpoints: model weights + optimizer state and hyperparameters + step
// + RNG state + model config, in ONE safetensors file written atomically (format: docs/checkpoints.md).
//
//   save_checkpoint("run/ckpt.safetensors", lm.state_dict(), opt, step, gen, lm.config.to_config_map());
//   ...
//   int64_t step = load_checkpoint("run/ckpt.safetensors",
//                                  [&](const auto& sd) { lm.load_state_dict(sd); },   // strict
//                                  opt, gen, lm.config.to_config_map());
//
// File: tensors "model.<name>" (the model's state dict) and "optim.<i>.<buffer>" (Optimizer::state());
// "__metadata__" holds the format name and version, the step, the generator state (exact, decimal),
// the optimizer kind with its hyperparameters (per group: lr, weight decay), "config.<key>", and a
// 64-bit checksum over all metadata and tensor bytes (safetensors has none), so that a damaged file
// is refused rather than loaded with wrong numbers.
//
// Saving replaces the file atomically (save_safetensors: temp file in the same directory, fsync,
// rename, fsync of the directory): a crash or error while writing leaves the previous checkpoint.
// Loading reads and checks everything first — format, config (all differences in one message),
// optimizer kind, fixed hyperparameters, group and parameter counts, state shapes, the model's
// strict load — and modifies the model, optimizer and generator only when all of it is valid.
//
// Layering: optim/ does not know nn/; the model is a plain name → tensor map on save and a loader
// callback on load, so any Module (or anything else with named tensors) can be checkpointed.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/tensor.h"
#include "optim/optimizer.h"

namespace tapegrad::optim {

inline constexpr const char* kCheckpointFormat = "tapegrad-checkpoint";
inline constexpr int kCheckpointFormatVersion = 1;

using ConfigMap = std::map<std::string, std::string>;
using TensorMap = std::map<std::string, Tensor>;

// The optimizer's kind and hyperparameters as stored. Fixed ones (AdamW: beta1, beta2, eps;
// SGD: momentum) must match on load; the per-group ones (lr, weight decay) are restored.
struct OptimizerInfo {
  std::string kind;                     // Optimizer::kind(): "AdamW", "SGD", …
  std::map<std::string, double> fixed;  // Optimizer::fixed_hyperparameters(): "beta1", "beta2", "eps" / "momentum"
  std::vector<double> lr, weight_decay; // one per group
  std::vector<int64_t> group_sizes;     // parameters per group
};

// Everything a checkpoint file holds, read and validated but not applied to anything.
struct Checkpoint {
  int64_t step = 0;
  Generator::State rng;
  ConfigMap config;          // without the "config." prefix
  std::string model_dtype;   // dtype of the model's tensors ("float32", "float64"; "mixed" if several)
  TensorMap model_state;     // without the "model." prefix
  StateList optimizer_state; // without the "optim." prefix (order not significant)
  OptimizerInfo optimizer;
  ConfigMap extra;           // the caller's own entries (without the "extra." prefix): never compared on load
};

// The optimizer's kind and hyperparameters (Optimizer::kind, fixed_hyperparameters, per-group lr/decay).
OptimizerInfo describe_optimizer(const Optimizer& optimizer);

// Writes the checkpoint atomically (see above). `model_state` is e.g. Module::state_dict();
// `config` e.g. TransformerLMConfig::to_config_map(). step ≥ 0 is the number of optimizer steps done.
// `extra`: the caller's own string entries (a trainer's tokens seen, best validation loss, …), stored
// as "extra.<key>" metadata under the checksum and returned by read_checkpoint; load never compares them.
void save_checkpoint(const std::string& path, const TensorMap& model_state, const Optimizer& optimizer, int64_t step,
                     const Generator& generator, const ConfigMap& config, const ConfigMap& extra = {});

// Reads and validates a checkpoint file (format, version, every metadata field); applies nothing.
// Useful to inspect a checkpoint or to build the model from its config before load_checkpoint.
Checkpoint read_checkpoint(const std::string& path);

// Loads `path` into the model (through load_model, which must either load all of the state or throw
// without changing anything, as Module::load_state_dict with strict = true does), the optimizer
// (state, per-group lr and weight decay) and the generator; returns the step. Refused with a
// tapegrad::Error, and nothing modified, when the file is unreadable or corrupt, its config differs
// from `expected_config` (the message lists every differing, missing and extra key), the optimizer
// kind or a fixed hyperparameter differs, the group or parameter counts differ, or a state shape does.
using ModelLoader = std::function<void(const TensorMap& model_state)>;
int64_t load_checkpoint(const std::string& path, const ModelLoader& load_model, Optimizer& optimizer,
                        Generator& generator, const ConfigMap& expected_config);
// The same from a checkpoint already read by read_checkpoint(path) (no second read of the file).
int64_t load_checkpoint(const Checkpoint& checkpoint, const std::string& path, const ModelLoader& load_model,
                        Optimizer& optimizer, Generator& generator, const ConfigMap& expected_config);

// The checksum stored as metadata "checksum": 16 hex digits of a 64-bit FNV-1a over every other metadata
// entry and every tensor's name, dtype, shape and bytes. Public for tools (and tests) that rewrite a
// checkpoint's metadata on purpose and must keep the file loadable.
std::string checkpoint_checksum(const std::map<std::string, std::string>& metadata, const TensorMap& tensors);

// "checkpoint config differs: d_model 64 (file) vs 128 (expected), ..." or "" when equal.
std::string config_differences(const ConfigMap& file, const ConfigMap& expected);

}  // namespace tapegrad::optim
