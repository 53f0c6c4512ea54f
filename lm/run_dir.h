// run_dir.h — the files of one training run, under its --out directory:
//   DIR/config.json                       every resolved option (model, training, data)
//   DIR/metrics.jsonl                     one JSON object per logged step and per evaluation
//   DIR/loss.svg                          train and validation loss against step and wall time
//   DIR/tokenizer.json                    the tokenizer the run was trained with (when it had one)
//   DIR/checkpoints/step_00000100.safetensors   every --checkpoint-every steps, the last K kept
//   DIR/checkpoints/best.safetensors      the checkpoint with the lowest validation loss so far
// Every file is replaced atomically (temp + rename) or appended line by line, so a process killed
// at any moment leaves the newest complete checkpoint loadable.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tapegrad::lm {

std::string checkpoints_dir(const std::string& run_dir);
std::string step_checkpoint_path(const std::string& run_dir, int64_t step);
std::string best_checkpoint_path(const std::string& run_dir);

// The step checkpoints (step_<N>.safetensors; temp files of interrupted writes are not listed),
// oldest first. An absent directory has none.
std::vector<std::pair<int64_t, std::string>> list_step_checkpoints(const std::string& run_dir);
std::optional<std::string> newest_checkpoint(const std::string& run_dir);

// Deletes all but the newest `keep_last` step checkpoints (best.safetensors is separate and kept),
// and leftover temp files of writes that were interrupted.
void prune_checkpoints(const std::string& run_dir, int keep_last);

// Creates the directory (and checkpoints/) and proves it writable by writing and removing a file;
// throws tapegrad::Error naming the directory otherwise.
void prepare_run_dir(const std::string& run_dir);

// The run directory a checkpoint file lies in (…/DIR/checkpoints/x.safetensors → …/DIR), or ""
// when the file is not inside a checkpoints/ folder.
std::string run_dir_of_checkpoint(const std::string& checkpoint_path);

// What a `--checkpoint X` (and `--init-from X`, `export ... X`, `quantize ... X`) names: a checkpoint file
// as it is, or the directory that `train`, `import` or `quantize` wrote (or its checkpoints/ folder): its
// best.safetensors when there is one, else its newest step checkpoint. `note` says which was taken
// ("" for a file). A directory holding neither is a tapegrad::Error that says so; a path that does not
// exist is one too.
struct ResolvedCheckpoint {
  std::string path;
  std::string note;  // e.g. "run/checkpoints/best.safetensors (the run's best: lowest validation loss)"
};
ResolvedCheckpoint resolve_checkpoint(const std::string& file_or_run_dir);

}  // namespace tapegrad::lm
