// trainer.h — the training loop of a TransformerLM as library code (the tool's `train` only parses
// options and calls this):
//
//   lm::TrainOptions o;  o.steps = 1000;  o.out_dir = "run";  o.eval_every = 100;
//   lm::Trainer t(lm::preset_config("micro", tok.vocab_size()), o, train_tokens, val_tokens);
//   lm::TrainResult r = t.run({.on_step = [](const lm::StepStats& s) { ... }});
//
// One optimizer step: grad_accum micro-batches of batch_size random windows (data::get_batch from
// the data generator), loss_i/grad_accum backpropagated for each (so the gradient is that of the
// mean loss), the global gradient norm computed (and clipped to grad_clip when > 0), lr set from
// the schedule with warm-up (optim/lr_schedule.h, cosine or WSD: lr(t), t = the step about to be taken;
// every group in proportion to its initial lr), the optimizer's step (optim/lm_optimizer.h: AdamW, or
// Muon for the blocks' matrices with AdamW for the rest; decay on matrices only, not the RMSNorm gains).
//
// Exact resume: a checkpoint holds the model, the optimizer's state, the step and the data generator's
// state (which fixes every future batch), so N steps + resume + M steps reproduces N+M steps bit
// for bit (same thread count). Stop requests (should_stop, e.g. after SIGTERM) end the loop after
// the current step with a checkpoint. A non-finite loss or gradient ends it BEFORE the optimizer
// step, without a checkpoint, naming the first parameter whose gradient is not finite.
//
// Instruction tuning (`train --sft`, lm/sft_data.h): constructed with SftData instead of token streams, a
// micro-batch is batch_size examples drawn uniformly (with replacement) by the same data generator — so resume
// stays exact — right-padded to the longest of them, with the loss on the answer tokens only (the targets of
// every other position are ignore_index); evaluate() is the answer-token loss over the held-out examples
// (lm/sft_eval.h); tokens seen count the real (unpadded) input tokens.
//
// Data parallel (a Communicator of N > 1 ranks, docs/distributed.md): every rank builds the same model
// (rank 0's weights are broadcast to be sure), draws the same global batch of batch_size windows from
// the same data generator and trains on its slice (windows r·B/N .. (r+1)·B/N); the gradients are
// averaged over the ranks (dist::GradientSync: buckets all-reduced while backward runs) before
// clipping, so every rank takes the same optimizer step. The reported loss is the mean over the ranks.
// Only rank 0 writes files (checkpoints, metrics, config, plot); every rank resumes from the same
// checkpoint; stop requests are agreed on (any rank's request stops all after the same step).
//
// CUDA graphs (TrainOptions::cuda_graph, `train --cuda-graph on`, a GPU only): after kCudaGraphWarmupSteps
// eager steps (AdamW's state exists, the allocator is warm) the next step is captured as two graphs —
// zero_grad, every micro-batch's forward and backward and the clipping (graph 1), AdamW (graph 2; an optimizer
// without a device step, Muon, runs eagerly after graph 1 instead) — and every
// later step replays them: the micro-batches are copied into the device tensors graph 1 reads, graph 1 is
// replayed, the losses and the norm are read (the step's one synchronisation, as eagerly), the divergence
// check runs (before the update, as eagerly), AdamW's scalars for this step are written to the device and
// graph 2 is replayed. The same kernels with the same arguments as the eager step: the same bits.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "dist/communicator.h"
#include "dist/grad_sync.h"
#include "lm/evaluate.h"
#include "lm/loss_plot.h"
#include "lm/metrics_log.h"
#include "lm/sft_data.h"
#include "nn/precision.h"
#include "nn/transformer_lm.h"
#include "optim/checkpoint.h"
#include "optim/lm_optimizer.h"
#include "optim/lr_schedule.h"

namespace tapegrad::lm {

// The seed of the generator the Trainer draws its batches from: a fixed offset from TrainOptions::seed
// (which initialises the model), so that the weights and the data order are different streams. A loop
// written by hand that uses Generator(seed) for the model and Generator(data_seed(seed)) for get_batch
// sees exactly the Trainer's batches (docs/learn/07_training_loop.md shows the two give equal losses).
constexpr uint64_t data_seed(uint64_t seed) { return seed + 0x9e3779b97f4a7c15ULL; }

struct TrainOptions {
  int64_t batch_size = 32;          // windows per micro-batch (B)
  int64_t grad_accum = 1;           // micro-batches per optimizer step
  int64_t steps = 1000;             // total optimizer steps (the run ends there)
  double lr = 1e-3, min_lr = 1e-4;  // the schedule from lr down to min_lr (AdamW's lr; Muon's moves in proportion)
  int64_t warmup_steps = 0;         // linear warm-up from 0
  // optim/lr_schedule.h: cosine (to cosine_steps) or warmup–stable–decay (a linear decay over the last
  // decay_fraction of the steps)
  optim::ScheduleKind schedule = optim::ScheduleKind::Cosine;
  int64_t cosine_steps = 0;         // end of the cosine (0: steps; negative is refused)
  double decay_fraction = 0.2;      // WSD: the share of the steps that decays, in (0, 1]
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  // optim/lm_optimizer.h: adamw, or muon (Muon for the blocks' weight matrices, AdamW with the settings above
  // for the rest); the Muon settings (optim/muon.h), its lr the value at the schedule's peak
  optim::OptimizerKind optimizer = optim::OptimizerKind::AdamW;
  double muon_lr = 0.02, muon_momentum = 0.95, muon_weight_decay = 0.0;
  bool muon_nesterov = true;
  int64_t muon_ns_steps = 5;
  optim::MuonLrAdjust muon_adjust_lr = optim::MuonLrAdjust::Original;
  double grad_clip = 1.0;           // 0: no clipping (the norm is still computed and logged); negative is refused
  uint64_t seed = 1337;             // model initialisation and data order
  std::string out_dir;              // "" : no files at all (a library user's choice)
  int64_t eval_every = 0;           // 0: evaluate only at the end (when there is validation data)
  bool eval_at_start = false;       // also evaluate before the first step (step 0: where a fine-tune starts from)
  int64_t eval_batch_size = 0;      // 0: batch_size
  int64_t checkpoint_every = 0;     // 0: checkpoint only at the end (and when stopped)
  int keep_last = 3;                // step checkpoints kept (best.safetensors is separate)
  int64_t log_every = 1;            // a metrics.jsonl line every N steps (and at the last); at least 1
  bool detect_anomaly = false;      // name the tape entry that first produced a non-finite value
  bool cuda_graph = false;          // replay the step as CUDA graphs after warm-up (see above; a GPU only)
  Device device = Device::cpu();    // where the model, its optimizer state and the batches live
  // What the forward passes compute in (nn/precision.h): bf16 = bf16 matmuls and attention with float32
  // master weights, gradients and AdamW state. Training steps and evaluations run under it.
  nn::Precision precision = nn::Precision::FP32;
  // Stored in config.json and in every checkpoint (as run.<key>): data paths, the tokenizer's
  // fingerprint ("tokenizer_fingerprint"), whatever the caller wants a checkpoint to remember.
  std::map<std::string, std::string> run_info;

  // Every field except run_info as strings (exact numbers), for config.json and checkpoints.
  std::map<std::string, std::string> to_map() const;
  // Throws tapegrad::Error naming the option at fault (its tool flag); negative counts and schedule
  // intervals are refused, 0 keeps the meaning given above.
  void validate() const;
};

// Instruction-tuning data for the Trainer (lm/sft_data.h).
struct SftData {
  std::vector<SftExample> train;  // drawn from at random
  std::vector<SftExample> val;    // held out (may be empty: then no evaluation)
  uint32_t pad_id = 0;            // fills the inputs after an example's end (any id: never attended to, never a target)
  size_t row_length = 0;          // every batch padded to this (0: the Trainer sets the longest example's, lm/sft_data.h)
};

struct StepStats {
  int64_t step = 0, steps = 0;   // optimizer steps done / total
  uint64_t tokens = 0;           // training tokens seen so far
  double loss = 0, lr = 0, grad_norm = 0;
  double step_seconds = 0;       // this step (data, forward, backward, clip, update)
  double tokens_per_s = 0;       // this step's tokens / step_seconds
  double wall_s = 0;             // training wall time so far (continues across resumes)
};

struct EvalStats {
  int64_t step = 0;
  EvalResult result;
  std::vector<std::pair<std::string, EvalResult>> groups;  // --sft: per task (lm/sft_eval.h), when several
  bool best = false;             // lowest validation loss so far
  double seconds = 0;
};

enum class TrainStatus { Completed, Stopped, Diverged };

struct TrainResult {
  TrainStatus status = TrainStatus::Completed;
  int64_t step = 0;
  std::string message;           // Stopped / Diverged: what happened
  std::string last_checkpoint;   // "" when none was written
  std::optional<EvalResult> last_eval;
};

struct TrainCallbacks {
  std::function<void(const StepStats&)> on_step;
  std::function<void(const EvalStats&)> on_eval;
  std::function<void(const std::string& path, int64_t step)> on_checkpoint;
  std::function<bool()> should_stop;  // polled after every step
};

class Trainer {
 public:
  // `train` (and `val`, when given) must outlive the trainer. Checks the options, the config and
  // that every token id in the data is below config.vocab_size (tapegrad::Error otherwise). With an
  // out_dir, prepares the run directory; run() refuses a directory that already holds checkpoints
  // unless resume() was called first.
  // `comm`: the ranks of a data-parallel run (nullptr: this process alone); with N ranks batch_size
  // (the global batch) must be a multiple of N.
  Trainer(const nn::TransformerLMConfig& config, TrainOptions options, data::TokenSource train,
          std::optional<data::TokenSource> val = std::nullopt, std::shared_ptr<dist::Communicator> comm = nullptr);
  // Instruction tuning: the same, drawing batches of examples from `sft.train` (see above). Checks that there are
  // training examples, that every id (and pad_id) is below config.vocab_size and that no example is longer than
  // context_length + 1 ids.
  Trainer(const nn::TransformerLMConfig& config, TrainOptions options, SftData sft,
          std::shared_ptr<dist::Communicator> comm = nullptr);
  ~Trainer();

  // Restores model, optimizer, step, data order, tokens seen, wall time and best validation loss
  // from a checkpoint. Refused (nothing changed) when its model config differs, or its
  // run_info["tokenizer_fingerprint"] differs from ours; the run directory the constructor created
  // for this trainer is removed again then, while it is still empty (run() makes it anew).
  void resume(const std::string& checkpoint_path);
  // The same from a checkpoint already read (optim::read_checkpoint(path)): the file is read once.
  void resume(const optim::Checkpoint& checkpoint, const std::string& path);

  // Starts from another model's weights (`train --init-from`: a checkpoint of ours, or one that `import
  // llama2c` / `import hf` wrote): the model's weights only — the optimizer state, the step (0), the data order
  // and the schedule stay this run's own. The checkpoint's model config must equal this model's (tapegrad::Error
  // naming the first field that differs and both values); nothing is changed when it is refused. Records the
  // source as run_info["init_from"] (kept in every checkpoint of this run). Call before run(), not with resume().
  // One difference is allowed: a vocabulary that grew (this model's vocab_size > the checkpoint's, e.g. the chat
  // template's special tokens appended for instruction tuning): the embedding and an untied lm_head get the new
  // rows as nn::grow_vocabulary says (the mean of the existing rows); every other weight is loaded as is.
  void init_from(const optim::Checkpoint& checkpoint, const std::string& path);

  // Trains until options.steps (or a stop request, or a non-finite loss/gradient).
  TrainResult run(const TrainCallbacks& callbacks = {});

  // One optimizer step; returns its stats. Throws lm::DivergedError on a non-finite loss/gradient
  // (before updating anything) — run() turns that into TrainStatus::Diverged.
  StepStats train_step();
  EvalResult evaluate() const;  // over the whole validation data / held-out examples (throws without any)
  // The byte length of each token id's text (lm/bits_per_byte.h): evaluations of token-stream data then
  // report bits per byte too (EvalResult, metrics.jsonl's val_bpb). Empty: not counted. Call before run().
  void set_token_byte_lengths(std::vector<uint32_t> lengths) { token_bytes_ = std::move(lengths); }
  // How loss.svg is drawn (lm/loss_plot.h: a log axis, the no-context reference line). Call before run().
  void set_plot_options(LossPlotOptions options) { plot_options_ = std::move(options); }
  // Writes DIR/checkpoints/step_<N>.safetensors (atomic), prunes old ones; returns the path.
  std::string save_checkpoint();

  nn::TransformerLM& model() { return *model_; }
  const TrainOptions& options() const { return options_; }
  int64_t step() const { return step_; }
  uint64_t tokens_seen() const { return tokens_; }
  const MetricsLog* metrics() const { return metrics_.get(); }
  const dist::Communicator& communicator() const { return *comm_; }

 private:
  void save_to(const std::string& path);
  void write_plot() const;
  std::string first_nonfinite_gradient() const;
  struct CapturedStep;  // --cuda-graph: the graphs and the device tensors they read and write (trainer.cpp)
  StepStats graph_step();  // train_step() once the step is (or is about to be) captured
  // The part of a step after its losses and norm are read: the divergence check, AdamW (`update`), the stats.
  StepStats finish_step(const std::vector<double>& losses, double norm, double lr, uint64_t step_tokens,
                        std::chrono::steady_clock::time_point t0, const std::function<void()>& update);
  void check_options_and_ranks();
  double scheduled_lr() const;  // the lr of the step about to be taken (step_), for the AdamW groups
  void build_model(const nn::TransformerLMConfig& config);  // model, optimizer, gradient sync, run directory
  data::Batch next_sft_batch(uint64_t& tokens);  // batch_size examples drawn by data_gen_; adds their input tokens

  TrainOptions options_;
  std::optional<data::TokenSource> train_;  // token-stream training
  std::optional<data::TokenSource> val_;
  std::unique_ptr<SftData> sft_;            // instruction tuning (instead of train_/val_)
  std::unique_ptr<nn::TransformerLM> model_;
  std::unique_ptr<optim::Optimizer> optimizer_;  // optim::make_lm_optimizer's choice
  Generator data_gen_;
  int64_t step_ = 0;
  uint64_t tokens_ = 0;
  double wall_s_ = 0;  // before this process's training started (restored on resume)
  double best_val_ = std::numeric_limits<double>::infinity();
  std::unique_ptr<MetricsLog> metrics_;
  std::shared_ptr<dist::Communicator> comm_;   // never null (SingleProcess by default)
  std::unique_ptr<dist::GradientSync> grad_sync_;  // with more than one rank
  bool writes_files_ = false;                  // out_dir set and rank 0
  bool resumed_ = false;
  std::vector<std::string> made_dirs_;  // the run directories the constructor created, innermost first
  int64_t eager_steps_ = 0;             // steps this process took eagerly (--cuda-graph warms up with them)
  std::unique_ptr<CapturedStep> captured_;
  std::vector<uint32_t> token_bytes_;  // set_token_byte_lengths (empty: no bits per byte)
  LossPlotOptions plot_options_;       // set_plot_options
};

// Eager steps a --cuda-graph run takes in each process before it captures the step.
inline constexpr int64_t kCudaGraphWarmupSteps = 1;
// "on" / "off" of `train --cuda-graph` (anything else: tapegrad::Error naming the flag).
bool parse_cuda_graph_flag(const std::string& value);

// A non-finite loss or gradient (the message names the step and the first such parameter).
class DivergedError : public Error {
 public:
  using Error::Error;
};

// The largest token id + 1 of a token stream (0 when empty): a token file's header may promise a
// vocabulary, this proves it.
uint64_t max_token_id_plus_one(const data::TokenSource& data);

}  // namespace tapegrad::lm
