// trainer.cpp — the training loop (see trainer.h for what one step does and why resume is exact).
#include "lm/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "autograd/io/exact_number.h"
#include "lm/loss_plot.h"
#include "data/file_io.h"
#include "kernels/backend.h"
#include "kernels/device_graph.h"
#include "lm/run_dir.h"
#include "lm/config_json.h"
#include "lm/sft_eval.h"
#include "nn/loss.h"
#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/lr_schedule.h"

namespace tapegrad::lm {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Weight decay on matrices (embeddings, linear weights), none on vectors (RMSNorm gains).
// The parameters for optim::make_lm_optimizer: the 2-D weights inside the blocks ("layers.…") are the hidden
// matrices Muon may take; the embedding, the LM head and the gains are not.
std::vector<optim::NamedParameter> named_for_optimizer(const nn::TransformerLM& model) {
  std::vector<optim::NamedParameter> out;
  for (const auto& [name, p] : model.named_parameters())
    out.push_back({name, p, p.dim() == 2 && name.starts_with("layers.")});
  return out;
}

// Removes `dirs` (innermost first; each only while it is empty) when it goes out of scope, unless
// dismissed: a resume() that refuses its checkpoint leaves no run directory behind that the
// constructor made for it.
class RemoveEmptyDirsUnlessDismissed {
 public:
  explicit RemoveEmptyDirsUnlessDismissed(const std::vector<std::string>& dirs) : dirs_(dirs) {}
  RemoveEmptyDirsUnlessDismissed(const RemoveEmptyDirsUnlessDismissed&) = delete;
  RemoveEmptyDirsUnlessDismissed& operator=(const RemoveEmptyDirsUnlessDismissed&) = delete;
  ~RemoveEmptyDirsUnlessDismissed() {
    if (dismissed_) return;
    std::error_code ignored;  // a directory that is not empty stays
    for (const std::string& d : dirs_) std::filesystem::remove(d, ignored);
  }
  void dismiss() { dismissed_ = true; }

 private:
  const std::vector<std::string>& dirs_;
  bool dismissed_ = false;
};

template <class T>
std::string exact(T v) {
  if constexpr (std::is_floating_point_v<T>) return format_exact(double(v));
  else return fmt::format("{}", v);
}

// A number the trainer stored in a checkpoint's extra metadata, read back exactly.
template <class T>
T parse_extra(const std::map<std::string, std::string>& m, const std::string& key, const std::string& path) {
  auto it = m.find(key);
  TG_CHECK(it != m.end(), "checkpoint '{}' was not written by the trainer: it has no '{}' (to start a new run from its weights, use "
           "--init-from instead of --resume)",
           path, key);
  return parse_number<T>(it->second, fmt::format("checkpoint '{}': '{}'", path, key));
}

}  // namespace

std::map<std::string, std::string> TrainOptions::to_map() const {
  return {{"batch_size", exact(batch_size)},   {"grad_accum", exact(grad_accum)},
          {"steps", exact(steps)},             {"lr", exact(lr)},
          {"min_lr", exact(min_lr)},           {"warmup_steps", exact(warmup_steps)},
          {"cosine_steps", exact(cosine_steps)}, {"beta1", exact(beta1)},
          {"schedule", optim::schedule_kind_name(schedule)}, {"decay_fraction", exact(decay_fraction)},
          {"optimizer", optim::optimizer_kind_name(optimizer)}, {"muon_lr", exact(muon_lr)},
          {"muon_momentum", exact(muon_momentum)}, {"muon_weight_decay", exact(muon_weight_decay)},
          {"muon_nesterov", muon_nesterov ? "true" : "false"}, {"muon_ns_steps", exact(muon_ns_steps)},
          {"muon_adjust_lr", optim::muon_lr_adjust_name(muon_adjust_lr)},
          {"beta2", exact(beta2)},             {"eps", exact(eps)},
          {"weight_decay", exact(weight_decay)}, {"grad_clip", exact(grad_clip)},
          {"seed", exact(seed)},               {"out_dir", out_dir},
          {"eval_every", exact(eval_every)},   {"eval_batch_size", exact(eval_batch_size)},
          {"eval_at_start", eval_at_start ? "true" : "false"},
          {"checkpoint_every", exact(checkpoint_every)}, {"keep_last", exact(keep_last)},
          {"log_every", exact(log_every)},     {"detect_anomaly", detect_anomaly ? "true" : "false"},
          {"device", device.str()},            {"precision", nn::precision_name(precision)},
          {"cuda_graph", cuda_graph ? "on" : "off"}};
}

bool parse_cuda_graph_flag(const std::string& value) {
  TG_CHECK(value == "on" || value == "off", "--cuda-graph must be on or off, but is '{}'", value);
  return value == "on";
}

void TrainOptions::validate() const {
  TG_CHECK(batch_size > 0, "--batch-size must be positive, but is {}", batch_size);
  TG_CHECK(grad_accum > 0, "--grad-accum must be positive, but is {}", grad_accum);
  TG_CHECK(steps > 0, "--steps must be positive, but is {}", steps);
  TG_CHECK(std::isfinite(lr) && lr >= 0, "--lr must be finite and >= 0, but is {}", lr);
  TG_CHECK(std::isfinite(min_lr) && min_lr >= 0 && min_lr <= lr, "--min-lr must be in [0, lr = {}], but is {}", lr,
           min_lr);
  const int64_t cosine = cosine_steps > 0 ? cosine_steps : steps;
  TG_CHECK(warmup_steps >= 0 && warmup_steps <= cosine, "--warmup-steps must be in [0, {}], but is {}", cosine,
           warmup_steps);
  TG_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "--beta1/--beta2 must be in [0, 1), but are {}, {}",
           beta1, beta2);
  TG_CHECK(std::isfinite(eps) && eps >= 0, "--eps must be finite and >= 0, but is {}", eps);
  TG_CHECK(std::isfinite(weight_decay) && weight_decay >= 0, "--weight-decay must be finite and >= 0, but is {}",
           weight_decay);
  TG_CHECK(std::isfinite(grad_clip) && grad_clip >= 0, "--grad-clip must be finite and >= 0 (0: off), but is {}",
           grad_clip);
  TG_CHECK(keep_last >= 1, "--keep-last must be at least 1, but is {}", keep_last);
  // The schedule: 0 keeps its documented meaning (at the end / the default), a negative value is a mistake.
  TG_CHECK(cosine_steps >= 0, "--cosine-steps must be >= 0 (0: steps), but is {}", cosine_steps);
  TG_CHECK(decay_fraction > 0 && decay_fraction <= 1, "--decay-fraction must be in (0, 1], but is {}", decay_fraction);
  if (schedule == optim::ScheduleKind::Wsd) {
    const int64_t decay = optim::wsd_decay_iters(steps, decay_fraction);
    TG_CHECK(warmup_steps <= steps - decay,
             "--warmup-steps {} runs into the decay: with --schedule wsd the last {} of {} steps decay "
             "(--decay-fraction {}), so the warm-up must end by step {}",
             warmup_steps, decay, steps, decay_fraction, steps - decay);
  }
  TG_CHECK(std::isfinite(muon_lr) && muon_lr >= 0, "--muon-lr must be finite and >= 0, but is {}", muon_lr);
  TG_CHECK(muon_momentum >= 0 && muon_momentum < 1, "--muon-momentum must be in [0, 1), but is {}", muon_momentum);
  TG_CHECK(std::isfinite(muon_weight_decay) && muon_weight_decay >= 0,
           "--muon-weight-decay must be finite and >= 0, but is {}", muon_weight_decay);
  TG_CHECK(muon_ns_steps >= 0 && muon_ns_steps < 100, "--muon-ns-steps must be in [0, 100), but is {}", muon_ns_steps);
  TG_CHECK(eval_every >= 0, "--eval-every must be >= 0 (0: only at the end), but is {}", eval_every);
  TG_CHECK(eval_batch_size >= 0, "--eval-batch-size must be >= 0 (0: the batch size), but is {}", eval_batch_size);
  TG_CHECK(checkpoint_every >= 0, "--checkpoint-every must be >= 0 (0: only at the end), but is {}", checkpoint_every);
  TG_CHECK(log_every >= 1, "--log-every must be at least 1, but is {}", log_every);
  TG_CHECK(!cuda_graph || device.type == DeviceType::CUDA,
           "--cuda-graph on needs --device cuda (CUDA graphs replay GPU work; --device {} runs each step eagerly)",
           device.str());
  TG_CHECK(!cuda_graph || !detect_anomaly,
           "--cuda-graph on cannot be combined with --detect-anomaly (it reads every op's output on the host, which a "
           "captured step cannot)");
}

uint64_t max_token_id_plus_one(const data::TokenSource& data) {
  uint64_t m = 0;
  for (uint64_t i = 0; i < data.size(); ++i) m = std::max<uint64_t>(m, uint64_t(data[i]) + 1);
  return m;
}

void Trainer::check_options_and_ranks() {
  options_.validate();
  const int ranks = comm_->world_size();
  TG_CHECK(options_.batch_size % ranks == 0,
           "--batch-size {} (the global batch) must be a multiple of the {} ranks: each takes an equal slice",
           options_.batch_size, ranks);
  writes_files_ = !options_.out_dir.empty() && comm_->rank() == 0;
  TG_CHECK(!options_.cuda_graph || ranks == 1,
           "--cuda-graph on: data-parallel training ({} ranks) is not captured (the gradients' all-reduce runs "
           "between backward's kernels); use --cuda-graph off",
           ranks);
}

Trainer::Trainer(const nn::TransformerLMConfig& config, TrainOptions options, data::TokenSource train,
                 std::optional<data::TokenSource> val, std::shared_ptr<dist::Communicator> comm)
    : options_(std::move(options)),
      train_(train),
      val_(val),
      data_gen_(data_seed(options_.seed)),
      comm_(comm ? std::move(comm) : std::make_shared<dist::SingleProcess>()) {
  check_options_and_ranks();
  TG_CHECK(config.context_length > 0 && train_->size() >= uint64_t(config.context_length) + 1,
           "the training data holds {} tokens, fewer than one window of context {} + 1", train_->size(),
           config.context_length);
  const uint64_t train_max = max_token_id_plus_one(*train_);
  TG_CHECK(train_max <= uint64_t(config.vocab_size),
           "the training data holds token id {}, outside the model's vocabulary of {} (another tokenizer?)",
           train_max - 1, config.vocab_size);
  if (val_) {
    const uint64_t val_max = max_token_id_plus_one(*val_);
    TG_CHECK(val_max <= uint64_t(config.vocab_size),
             "the validation data holds token id {}, outside the model's vocabulary of {} (another tokenizer?)",
             val_max - 1, config.vocab_size);
    const int64_t eval_context = std::min<int64_t>(config.context_length, int64_t(val_->size()) - 1);
    TG_CHECK(eval_context == config.context_length,
             "the validation data holds {} tokens, fewer than one window of context {} + 1", val_->size(),
             config.context_length);
  }
  build_model(config);
}

Trainer::Trainer(const nn::TransformerLMConfig& config, TrainOptions options, SftData sft,
                 std::shared_ptr<dist::Communicator> comm)
    : options_(std::move(options)),
      sft_(std::make_unique<SftData>(std::move(sft))),
      data_gen_(data_seed(options_.seed)),
      comm_(comm ? std::move(comm) : std::make_shared<dist::SingleProcess>()) {
  check_options_and_ranks();
  TG_CHECK(!options_.cuda_graph,
           "--cuda-graph on is not available with --sft (its capture was never built for the example batches); use "
           "--cuda-graph off");
  TG_CHECK(!sft_->train.empty(), "--sft: there are no training examples");
  sft_->row_length = std::max(sft_->row_length, longest_sft_row({&sft_->train, &sft_->val}));
  TG_CHECK(int64_t(sft_->row_length) <= config.context_length, "--sft: rows of {} positions exceed the context {}",
           sft_->row_length, config.context_length);
  TG_CHECK(int64_t(sft_->pad_id) < config.vocab_size, "the padding id {} is outside the model's vocabulary of {}",
           sft_->pad_id, config.vocab_size);
  for (const auto* set : {&sft_->train, &sft_->val})
    for (const SftExample& ex : *set) {
      TG_CHECK(ex.ids.size() >= 2 && ex.ids.size() == ex.trained.size() && ex.answer_tokens() > 0,
               "{}: an example needs at least 2 ids, a mask of the same length and an answer token", ex.where);
      TG_CHECK(int64_t(ex.ids.size()) <= config.context_length + 1,
               "{}: the example is {} tokens, more than the context {} + 1", ex.where, ex.ids.size(),
               config.context_length);
      const uint32_t top = *std::max_element(ex.ids.begin(), ex.ids.end());
      TG_CHECK(int64_t(top) < config.vocab_size, "{}: token id {} is outside the model's vocabulary of {}", ex.where,
               top, config.vocab_size);
    }
  build_model(config);
}

void Trainer::build_model(const nn::TransformerLMConfig& config) {
  const int ranks = comm_->world_size();
  Generator init_gen(options_.seed);
  model_ = std::make_unique<nn::TransformerLM>(config, &init_gen);
  model_->to(options_.device);  // initialised on the host (the same numbers on every device), then moved
  // --precision tf32: TF32 tensor cores for the GPU's float32 matmuls (the CPU has none: fp32 there).
  if (options_.device.type == DeviceType::CUDA)
    kernels::set_cuda_allow_tf32(options_.precision == nn::Precision::TF32);
  const TrainOptions& o = options_;
  optim::LmOptimizerSettings settings;
  settings.kind = o.optimizer;
  settings.adamw = optim::AdamWOptions(o.lr).betas(o.beta1, o.beta2).eps(o.eps).weight_decay(o.weight_decay);
  // Newton–Schulz in bf16 on a GPU (as nanochat and modded-nanogpt), in float32 on the CPU (no faster in bf16).
  settings.muon = optim::MuonOptions(o.muon_lr)
                      .momentum(o.muon_momentum)
                      .nesterov(o.muon_nesterov)
                      .weight_decay(o.muon_weight_decay)
                      .ns_steps(int(o.muon_ns_steps))
                      .adjust_lr(o.muon_adjust_lr)
                      .ns_dtype(o.device.type == DeviceType::CUDA ? std::optional<DType>(kBFloat16) : std::nullopt);
  optimizer_ = optim::make_lm_optimizer(named_for_optimizer(*model_), settings);
  if (ranks > 1) {
    // The same seed gives every rank the same weights; broadcasting rank 0's makes sure of it.
    for (auto& [name, p] : model_->named_parameters()) comm_->broadcast(p, 0);
    grad_sync_ = std::make_unique<dist::GradientSync>(comm_, optimizer_->params());
  }
  if (writes_files_) {
    std::error_code ec;
    for (std::filesystem::path p = checkpoints_dir(options_.out_dir); !p.empty() && !std::filesystem::exists(p, ec);
         p = p.parent_path())
      made_dirs_.push_back(p.string());
    prepare_run_dir(options_.out_dir);
  }
}

// --cuda-graph: the captured step (see trainer.h) and the device tensors it reads and writes.
struct Trainer::CapturedStep {
  std::vector<Tensor> inputs, targets;  // one micro-batch each, on the device: each step's batch is copied in
  Tensor values;                        // float64 [grad_accum + 1] on the device: the losses, then the norm
  std::unique_ptr<kernels::DeviceGraph> forward_backward;  // zero_grad, forward, backward, clipping
  std::unique_ptr<kernels::DeviceGraph> update;            // AdamW, its scalars read from the device
  uint64_t update_runs_version = 0;  // optimizer_->device_runs_version() when `update` was captured
};

Trainer::~Trainer() = default;

void Trainer::resume(const std::string& path) {
  RemoveEmptyDirsUnlessDismissed undo_dirs(made_dirs_);
  resume(optim::read_checkpoint(path), path);
  undo_dirs.dismiss();
}

void Trainer::resume(const optim::Checkpoint& ck, const std::string& path) {
  RemoveEmptyDirsUnlessDismissed undo_dirs(made_dirs_);
  // The tokenizer (when both know theirs) must be the one the data was encoded with.
  const auto fp_file = ck.extra.find("run.tokenizer_fingerprint");
  const auto fp_mine = options_.run_info.find("tokenizer_fingerprint");
  if (fp_file != ck.extra.end() && fp_mine != options_.run_info.end())
    TG_CHECK(fp_file->second == fp_mine->second,
             "checkpoint '{}' was trained with another tokenizer (fingerprint {}, this run's tokenizer {})", path,
             fp_file->second, fp_mine->second);
  const auto tokens = parse_extra<uint64_t>(ck.extra, "tokens", path);
  const auto wall = parse_extra<double>(ck.extra, "wall_s", path);
  const double best = ck.extra.count("best_val_loss") ? parse_extra<double>(ck.extra, "best_val_loss", path)
                                                      : std::numeric_limits<double>::infinity();
  step_ = optim::load_checkpoint(
      ck, path, [&](const optim::TensorMap& sd) { model_->load_state_dict(sd); }, *optimizer_, data_gen_,
      model_->config.to_config_map());
  tokens_ = tokens;
  wall_s_ = wall;
  best_val_ = best;
  resumed_ = true;
  undo_dirs.dismiss();
}

void Trainer::init_from(const optim::Checkpoint& ck, const std::string& path) {
  TG_CHECK(!resumed_, "--init-from goes with a new run, not with --resume (a resumed run has its own weights)");
  TG_CHECK(step_ == 0, "--init-from: this run has already taken {} steps", step_);
  nn::TransformerLMConfig theirs;
  try {
    theirs = nn::TransformerLMConfig::from_config_map(ck.config);
  } catch (const Error& e) {
    throw Error(fmt::format("--init-from '{}' does not hold a TransformerLM config: {}", path, e.what()));
  }
  // A vocabulary that grew (the chat template's tokens appended) is the one difference allowed.
  const bool grown = theirs.vocab_size < model_->config.vocab_size;
  const optim::ConfigMap want = model_->config.to_config_map(), have = theirs.to_config_map();
  for (const auto& [key, value] : want) {
    if (grown && key == "vocab_size") continue;
    const auto it = have.find(key);
    TG_CHECK(it != have.end() && it->second == value,
             "--init-from '{}': its model has {} = {}, this run's model {} = {} (leave the model options out to take "
             "the checkpoint's)",
             path, key, it == have.end() ? "(none)" : it->second, key, value);
  }
  // Strict: every tensor of the model, with its shape; the parameters keep their device.
  try {
    model_->load_state_dict(grown ? nn::grow_vocabulary(ck.model_state, model_->config.vocab_size) : ck.model_state);
  } catch (const Error& e) {
    throw Error(fmt::format("--init-from '{}': {}", path, e.what()));
  }
  options_.run_info["init_from"] = path;
}

std::string Trainer::first_nonfinite_gradient() const {
  for (const auto& [name, p] : model_->named_parameters()) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    const double s = g.to(kFloat64).abs().sum().item<double>();
    if (!std::isfinite(s)) return name;
  }
  return "";
}

double Trainer::scheduled_lr() const {
  const TrainOptions& o = options_;
  if (o.schedule == optim::ScheduleKind::Wsd)
    return optim::wsd_lr(step_, o.lr, o.min_lr, o.warmup_steps, o.steps,
                         optim::wsd_decay_iters(o.steps, o.decay_fraction));
  return optim::cosine_lr(step_, o.lr, o.min_lr, o.warmup_steps, o.cosine_steps > 0 ? o.cosine_steps : o.steps);
}

StepStats Trainer::train_step() {
  if (options_.cuda_graph && eager_steps_ >= kCudaGraphWarmupSteps) return graph_step();
  const auto t0 = Clock::now();
  const nn::TransformerLMConfig& c = model_->config;
  const double lr = scheduled_lr();
  DetectAnomalyGuard anomaly(options_.detect_anomaly);
  nn::PrecisionGuard precision(options_.precision);
  optimizer_->zero_grad();
  // On the CPU each micro-batch's loss is read as it is made. On a GPU a read synchronises the host
  // with the device, so the losses stay there and are read once, with the gradient norm, after
  // backward: one synchronisation per step, whatever grad_accum is.
  const bool on_host = options_.device.type == DeviceType::CPU;
  std::vector<double> losses;        // per micro-batch, as read
  std::vector<Tensor> device_values; // on a GPU: the losses [1] each, then the norm
  const int ranks = comm_->world_size();
  uint64_t step_tokens = 0;  // real input tokens (an SFT batch's padding is not counted)
  try {
    for (int64_t micro = 0; micro < options_.grad_accum; ++micro) {
      data::Batch b;
      if (sft_) {
        b = next_sft_batch(step_tokens);
      } else {
        b = data::get_batch(*train_, options_.batch_size, c.context_length, data_gen_);
        step_tokens += uint64_t(options_.batch_size * c.context_length);
      }
      if (ranks > 1) {  // this rank's slice of the global batch
        const int64_t local = options_.batch_size / ranks;
        b.inputs = b.inputs.narrow(0, comm_->rank() * local, local).contiguous();
        b.targets = b.targets.narrow(0, comm_->rank() * local, local).contiguous();
      }
      const Device d = options_.device;  // the batch is drawn on the host, then copied
      Tensor loss = nn::cross_entropy(model_->forward(b.inputs.to(d)), b.targets.to(d));
      if (on_host) losses.push_back(loss.item<double>());
      else device_values.push_back(loss.detach().to(kFloat64).reshape({1}));
      // The last micro-batch's backward averages the gradients over the ranks as it goes.
      const bool last_micro = micro + 1 == options_.grad_accum;
      if (grad_sync_ && last_micro) grad_sync_->begin();
      // Backward even for a loss that is not finite: the gradients show which parameter went wrong first.
      (options_.grad_accum > 1 ? loss * (1.0 / double(options_.grad_accum)) : loss).backward();
      if (grad_sync_ && last_micro) grad_sync_->finish();
      // (With several ranks every rank runs every micro-batch: they must all join the same collectives.)
      if (on_host && ranks == 1 && !std::isfinite(losses.back())) break;
    }
  } catch (const Error& e) {
    if (!options_.detect_anomaly || !std::string_view(e.what()).starts_with("anomaly detection")) throw;
    throw DivergedError(fmt::format("step {}: {}", step_ + 1, e.what()));
  }
  // The norm before clipping; clipping scales nothing when it is not finite.
  const double max_norm = options_.grad_clip > 0 ? options_.grad_clip : std::numeric_limits<double>::max();
  double norm = 0;
  if (on_host) {
    norm = optim::clip_grad_norm(optimizer_->params(), max_norm);
  } else {
    const Tensor n = optim::clip_grad_norm_tensor(optimizer_->params(), max_norm);
    device_values.push_back(n.defined() ? n.reshape({1}) : zeros({1}, Options(kFloat64).device(options_.device)));
    std::vector<double> read = cat(device_values, 0).to_vector<double>();  // the step's one synchronisation
    norm = read.back();
    read.pop_back();
    losses = std::move(read);
  }
  if (ranks > 1) {  // the mean over the ranks of each micro-batch's loss
    Tensor all = tensor(losses, kFloat64).to(options_.device);  // (NCCL reduces device tensors only)
    comm_->all_reduce(all, dist::ReduceOp::Mean);
    losses = all.to_vector<double>();
  }
  StepStats s = finish_step(losses, norm, lr, step_tokens, t0, [&] { optimizer_->step(); });
  ++eager_steps_;
  return s;
}

StepStats Trainer::finish_step(const std::vector<double>& losses, double norm, double lr, uint64_t step_tokens,
                               Clock::time_point t0, const std::function<void()>& update) {
  double loss_sum = 0;
  std::string bad_loss;  // "the loss is nan (micro-batch 0)" when a loss is not finite
  for (size_t micro = 0; micro < losses.size(); ++micro) {
    const double value = losses[micro];
    loss_sum += value;
    if (bad_loss.empty() && !std::isfinite(value))
      bad_loss = fmt::format("the loss is {} (micro-batch {})", std::isnan(value) ? "NaN" : fmt::format("{}", value),
                             micro);
  }
  if (!bad_loss.empty() || !std::isfinite(norm)) {
    const std::string name = first_nonfinite_gradient();
    throw DivergedError(fmt::format("step {}: {}the gradient norm is {}; the first parameter whose gradient is not "
                                    "finite: {}",
                                    step_ + 1, bad_loss.empty() ? "" : bad_loss + "; ",
                                    std::isnan(norm) ? std::string("NaN") : fmt::format("{}", norm),
                                    name.empty() ? "(none)" : name));
  }
  // Every group in proportion to its initial lr (a Muon group's differs from AdamW's).
  if (options_.lr > 0) optimizer_->set_lr_relative(lr, options_.lr);
  else optimizer_->set_lr(0.0);
  update();
  ++step_;
  tokens_ += step_tokens;
  StepStats s;
  s.step = step_;
  s.steps = options_.steps;
  s.tokens = tokens_;
  s.loss = loss_sum / double(options_.grad_accum);
  s.lr = lr;
  s.grad_norm = norm;
  s.step_seconds = seconds_since(t0);
  s.tokens_per_s = double(step_tokens) / s.step_seconds;
  return s;
}

StepStats Trainer::graph_step() {
  const auto t0 = Clock::now();
  const nn::TransformerLMConfig& c = model_->config;
  const double lr = scheduled_lr();
  const double max_norm = options_.grad_clip > 0 ? options_.grad_clip : std::numeric_limits<double>::max();
  nn::PrecisionGuard precision(options_.precision);
  kernels::Backend& backend = kernels::backend(options_.device);
  // The micro-batches, drawn as the eager step draws them, copied into the tensors the graph reads.
  const bool first = captured_ == nullptr;
  if (first) captured_ = std::make_unique<CapturedStep>();
  CapturedStep& cs = *captured_;
  uint64_t step_tokens = 0;
  for (int64_t micro = 0; micro < options_.grad_accum; ++micro) {
    const data::Batch b = data::get_batch(*train_, options_.batch_size, c.context_length, data_gen_);
    step_tokens += uint64_t(options_.batch_size * c.context_length);
    if (first) {
      cs.inputs.push_back(b.inputs.to(options_.device));
      cs.targets.push_back(b.targets.to(options_.device));
    } else {
      cs.inputs[size_t(micro)].copy_(b.inputs);
      cs.targets[size_t(micro)].copy_(b.targets);
    }
  }
  auto refused = [](const char* what, const Error& e) {
    return Error(fmt::format("--cuda-graph on: {} cannot be captured as a CUDA graph: {}", what, e.what()));
  };
  if (first) {  // graph 1: the same operations as the eager step's, on the captured inputs
    try {
      cs.forward_backward = kernels::capture_device_work(backend, [&] {
        optimizer_->zero_grad();
        std::vector<Tensor> values;
        for (size_t micro = 0; micro < cs.inputs.size(); ++micro) {
          Tensor loss = nn::cross_entropy(model_->forward(cs.inputs[micro]), cs.targets[micro]);
          values.push_back(loss.detach().to(kFloat64).reshape({1}));
          (options_.grad_accum > 1 ? loss * (1.0 / double(options_.grad_accum)) : loss).backward();
        }
        const Tensor n = optim::clip_grad_norm_tensor(optimizer_->params(), max_norm);
        values.push_back(n.defined() ? n.reshape({1}) : zeros({1}, Options(kFloat64).device(options_.device)));
        cs.values = cat(values, 0);
      });
    } catch (const Error& e) {
      captured_.reset();
      throw refused("the forward and backward pass", e);
    }
    TG_CHECK(cs.forward_backward != nullptr, "--cuda-graph on: the backend of {} cannot capture CUDA graphs",
             options_.device.str());
  }
  cs.forward_backward->replay();
  std::vector<double> losses = cs.values.to_vector<double>();  // the step's one synchronisation
  const double norm = losses.back();
  losses.pop_back();
  return finish_step(losses, norm, lr, step_tokens, t0, [&] {
    if (!optimizer_->has_device_step()) {  // (Muon) the update runs eagerly after the graph
      optimizer_->step();
      return;
    }
    // graph 2: AdamW with this step's scalars (written to the device now), captured when its runs are new
    optimizer_->prepare_device_step();
    if (cs.update == nullptr || cs.update_runs_version != optimizer_->device_runs_version()) {
      cs.update.reset();
      try {
        cs.update = kernels::capture_device_work(backend, [&] { optimizer_->step_from_device(); });
      } catch (const Error& e) {
        throw refused("the AdamW update", e);
      }
      cs.update_runs_version = optimizer_->device_runs_version();
    }
    cs.update->replay();
  });
}

data::Batch Trainer::next_sft_batch(uint64_t& tokens) {
  std::vector<size_t> which(size_t(options_.batch_size));
  for (size_t& i : which) {
    i = size_t(data_gen_.below(sft_->train.size()));
    tokens += sft_->train[i].ids.size() - 1;
  }
  return sft_batch(sft_->train, which, sft_->pad_id, sft_->row_length);
}

EvalResult Trainer::evaluate() const {
  nn::PrecisionGuard precision(options_.precision);
  const int64_t b = options_.eval_batch_size > 0 ? options_.eval_batch_size : options_.batch_size;
  if (sft_) {
    TG_CHECK(!sft_->val.empty(), "evaluate: this trainer has no held-out examples");
    return evaluate_sft(*model_, sft_->val, b, sft_->pad_id, sft_->row_length);
  }
  TG_CHECK(val_.has_value(), "evaluate: this trainer has no validation data");
  return lm::evaluate(*model_, *val_, b, 0, token_bytes_.empty() ? nullptr : &token_bytes_);
}

void Trainer::save_to(const std::string& path) {
  std::map<std::string, std::string> extra;
  extra["tokens"] = exact(tokens_);
  extra["wall_s"] = exact(wall_s_);
  if (std::isfinite(best_val_)) extra["best_val_loss"] = exact(best_val_);
  for (const auto& [k, v] : options_.to_map()) extra["train." + k] = v;
  for (const auto& [k, v] : options_.run_info) extra["run." + k] = v;
  optim::save_checkpoint(path, model_->state_dict(), *optimizer_, step_, data_gen_, model_->config.to_config_map(),
                         extra);
}

std::string Trainer::save_checkpoint() {
  TG_CHECK(!options_.out_dir.empty(), "save_checkpoint: the trainer has no out_dir");
  const std::string path = step_checkpoint_path(options_.out_dir, step_);
  save_to(path);
  prune_checkpoints(options_.out_dir, options_.keep_last);
  return path;
}

void Trainer::write_plot() const {
  if (options_.out_dir.empty() || !metrics_) return;
  const std::string title =
      fmt::format("{} — {} parameters, step {}", std::filesystem::path(options_.out_dir).filename().string(),
                  model_->num_parameters(), step_);
  data::write_file_atomic((std::filesystem::path(options_.out_dir) / "loss.svg").string(),
                         loss_svg(metrics_->records(), title, plot_options_), "train");
}

namespace {

// `to` as a second name (hard link) of the checkpoint `from`, replacing what `to` was in one rename; false where the
// file system has no hard links (the caller then writes a copy).
bool link_checkpoint(const std::string& from, const std::string& to) {
  std::error_code error;
  const std::string temp = to + ".link.tmp";
  std::filesystem::remove(temp, error);
  std::filesystem::create_hard_link(from, temp, error);
  if (error) return false;
  std::filesystem::rename(temp, to, error);
  if (!error) return true;
  std::filesystem::remove(temp, error);
  return false;
}

}  // namespace

TrainResult Trainer::run(const TrainCallbacks& cb) {
  if (!options_.out_dir.empty())
    TG_CHECK(resumed_ || !newest_checkpoint(options_.out_dir),
             "'{}' already holds checkpoints of a run: resume it (--resume) or choose another --out",
             options_.out_dir);
  const std::string dir = writes_files_ ? options_.out_dir : "";  // only rank 0 writes
  if (!dir.empty()) {
    prepare_run_dir(dir);  // again: a resume() that failed has removed what the constructor made
    data::write_file_atomic((std::filesystem::path(dir) / "config.json").string(),
                            run_config_json(model_->config.to_config_map(), options_.to_map(), options_.run_info,
                                            model_->num_parameters()),
                            "train");
    metrics_ = std::make_unique<MetricsLog>((std::filesystem::path(dir) / "metrics.jsonl").string(),
                                            resumed_ ? step_ : -1);
  }
  const auto t_start = Clock::now();
  const double wall0 = wall_s_;
  auto wall = [&] { return wall0 + seconds_since(t_start); };
  TrainResult result;
  auto checkpoint = [&] {
    if (dir.empty()) return;
    wall_s_ = wall();
    result.last_checkpoint = save_checkpoint();
    if (cb.on_checkpoint) cb.on_checkpoint(result.last_checkpoint, step_);
  };
  bool best_due = false;
  auto run_eval = [&] {
    const auto t0 = Clock::now();
    EvalStats e;
    e.step = step_;
    e.result = evaluate();
    if (sft_) {
      nn::PrecisionGuard precision(options_.precision);
      const int64_t b = options_.eval_batch_size > 0 ? options_.eval_batch_size : options_.batch_size;
      e.groups = evaluate_sft_by_group(*model_, sft_->val, b, sft_->pad_id, sft_->row_length);
    }
    e.seconds = seconds_since(t0);
    e.best = e.result.loss < best_val_;
    result.last_eval = e.result;
    if (e.best) best_val_ = e.result.loss;
    if (metrics_) {
      MetricRecord r;
      r.kind = MetricRecord::Kind::Eval;
      r.step = step_, r.tokens = tokens_, r.wall_s = wall();
      r.val_loss = e.result.loss, r.val_perplexity = e.result.perplexity, r.val_tokens = e.result.tokens;
      r.val_bpb = e.result.bits_per_byte;
      for (const auto& [group, result] : e.groups) r.val_loss_by_group.emplace_back(group, result.loss);
      metrics_->append(r);
      write_plot();
    }
    best_due = e.best && !dir.empty();  // written after this step's checkpoint, as a second name of it
    if (cb.on_eval) cb.on_eval(e);
  };
  // best.safetensors: a hard link to this step's checkpoint when there is one (no second copy on disk), else
  // written afresh.
  auto write_best = [&](bool checkpointed) {
    if (!best_due) return;
    best_due = false;
    if (checkpointed && link_checkpoint(result.last_checkpoint, best_checkpoint_path(dir))) return;
    wall_s_ = wall();
    save_to(best_checkpoint_path(dir));
  };

  const bool can_eval = val_ || (sft_ && !sft_->val.empty());
  if (can_eval && options_.eval_at_start && step_ == 0) {  // where the run starts from (not on a resume)
    run_eval();
    write_best(false);
  }
  while (step_ < options_.steps) {
    StepStats s;
    try {
      s = train_step();
    } catch (const DivergedError& e) {
      result.status = TrainStatus::Diverged;
      result.step = step_;
      result.message = e.what();
      if (metrics_) write_plot();
      return result;
    }
    s.wall_s = wall();
    if (metrics_ && (step_ % std::max<int64_t>(options_.log_every, 1) == 0 || step_ == options_.steps)) {
      MetricRecord r;
      r.step = step_, r.tokens = tokens_, r.wall_s = s.wall_s;
      r.loss = s.loss, r.lr = s.lr, r.grad_norm = s.grad_norm, r.tokens_per_s = s.tokens_per_s;
      metrics_->append(r);
    }
    if (cb.on_step) cb.on_step(s);
    const bool last = step_ == options_.steps;
    if (can_eval && (last || (options_.eval_every > 0 && step_ % options_.eval_every == 0))) run_eval();
    bool stop = !last && cb.should_stop && cb.should_stop();
    if (!last && comm_->world_size() > 1) {  // any rank's stop request stops every rank after this step
      Tensor flag = scalar_tensor(stop ? 1.0 : 0.0, Options(kFloat64).device(options_.device));
      comm_->all_reduce(flag, dist::ReduceOp::Sum);
      stop = flag.item<double>() > 0;
    }
    const bool checkpointed =
        !dir.empty() && (last || stop || (options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0));
    if (checkpointed) checkpoint();
    write_best(checkpointed);
    if (stop) {
      result.status = TrainStatus::Stopped;
      result.step = step_;
      result.message = fmt::format("stopped after step {} of {}", step_, options_.steps);
      return result;
    }
  }
  if (metrics_) write_plot();
  result.status = TrainStatus::Completed;
  result.step = step_;
  return result;
}

}  // namespace tapegrad::lm
