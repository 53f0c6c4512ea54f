// cmd_train.cpp — `tapegrad train`: builds the model config, data and lm::TrainOptions from the
// options, then runs lm::Trainer with the progress line. The loop itself is lm/trainer.cpp.
//   tapegrad train --model micro --text corpus.txt --tokenizer tok/ --steps 2000 --out run
//   tapegrad train --train train.bin --val val.bin --d-model 256 --layers 4 --heads 8 --out run
//   tapegrad train ... --resume            (continue from the newest checkpoint in --out)
//   tapegrad train --init-from base/ --text mine.txt --steps 500 --out tuned   (fine-tune: docs/training.md)
//   tapegrad train --init-from base/ --sft chat.jsonl --steps 300 --out chat   (instruction tuning: docs/training.md)
//   mpirun -np 2 tapegrad train ... --distributed   (data parallel over MPI: docs/distributed.md)
#include <fmt/format.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "autograd/io/exact_number.h"
#include "autograd/ops_from_table.h"
#include "data/file_io.h"
#include "data/hf_tokenizer_json.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "data/tokenizer_files.h"
#include "dist/communicator.h"
#include "kernels/backend.h"
#include "lm/bits_per_byte.h"
#include "lm/chat_template.h"
#include "lm/evaluate.h"
#include "lm/memory_estimate.h"
#include "lm/model_budget.h"
#include "lm/model_io.h"
#include "lm/model_presets.h"
#include "lm/run_dir.h"
#include "lm/sft_data.h"
#include "lm/text_codec.h"
#include "lm/text_split.h"
#include "lm/text_tokenizer.h"
#include "lm/throughput.h"
#include "lm/train_recipe.h"
#include "lm/trainer.h"
#include "optim/checkpoint.h"
#include "tools/commands.h"
#include "tools/progress.h"
#include "tools/stop_signals.h"

namespace tapegrad::cli {

namespace {

const char* kUsage =
    "tapegrad train (--text FILE --tokenizer T | --train TOKENS.bin [--val TOKENS.bin]) --out DIR [options]";

// The model options that shape the network; when resuming without any of them, the checkpoint's config is used.
constexpr const char* kModelFlags[] = {"model",     "vocab-size",     "context",    "d-model",
                                       "layers",    "heads",          "kv-heads",   "d-ff",
                                       "rope-theta", "tie-embeddings", "ffn",        "qk-norm",
                                       "norm-gain", "embed-norm",     "zero-init-projections", "logit-softcap"};

void add_options(po::options_description& opts) {
  opts.add_options()
      // model
      ("model", po::value<std::string>(), "preset: micro | small | tiny (other model options override its fields)")
      ("vocab-size", po::value<int64_t>(), "vocabulary size (default: the tokenizer's, else the token file's)")
      ("context", po::value<int64_t>(), "context length T")
      ("d-model", po::value<int64_t>(), "model width C")
      ("layers", po::value<int64_t>(), "Transformer blocks L")
      ("heads", po::value<int64_t>(), "attention heads H")
      ("kv-heads", po::value<int64_t>(), "key/value heads (GQA; default: heads)")
      ("d-ff", po::value<int64_t>(), "feed-forward hidden size (default: SwiGLU 8/3·d_model rounded up to 64, ReLU² 4·d_model)")
      ("rope-theta", po::value<double>(), "RoPE base θ (default 10000)")
      ("tie-embeddings", po::value<bool>(), "share the token embedding with the LM head (true/false)")
      // the modern options (default: the --recipe's; docs/training.md, "The modern architecture")
      ("ffn", po::value<std::string>(), "swiglu|relu2: the feed-forward, SwiGLU (Llama) or relu(x)² (modded-nanogpt)")
      ("qk-norm", po::value<bool>(), "RMSNorm over each head's queries and keys before RoPE (true/false)")
      ("norm-gain", po::value<bool>(), "the RMSNorms' learned gains (true/false; false: plain x/rms(x))")
      ("embed-norm", po::value<bool>(), "an RMSNorm right after the token embedding (true/false)")
      ("zero-init-projections", po::value<bool>(), "attention's and the feed-forward's output projections start at "
       "zero (true/false)")
      ("logit-softcap", po::value<double>(), "c > 0: logits c·tanh(z/c) (0: none)")
      // data
      ("text", po::value<std::vector<std::string>>()->multitoken(), "text files, directories (their *.txt, *.text, *.md, *.jsonl, sorted by path) and JSONL files, tokenized here in order; the last documents are the validation data")
      ("text-field", po::value<std::string>()->default_value("text"), "--text: the JSONL field that holds each document")
      ("val-fraction", po::value<double>()->default_value(0.1, "0.1"), "fraction held out for validation: --text its last documents (one document: its last tokens), --sft a seeded random subset; 0: none")
      ("train", po::value<std::string>(), "training token file (tapegrad tokenize encode)")
      ("val", po::value<std::string>(), "validation token file")
      ("tokenizer", po::value<std::string>(), "tokenizer.json, a tokenizer folder, or llama2.c's tokenizer.bin (required with --text)")
      // --sft: instruction tuning (lm/sft_data.h, docs/training.md)
      ("sft", po::value<std::string>(), "instruction tuning on a JSONL of {\"messages\": [{\"role\", \"content\"}, ...]} "
       "or {\"prompt\", \"completion\"} lines, the chat template applied, the loss on the answers only")
      ("sft-val", po::value<std::string>(), "--sft: held-out examples (default: --val-fraction of --sft's, spread evenly)")
      // optimization
      ("batch-size", po::value<int64_t>(), "windows per micro-batch (default: the preset's, else 32)")
      ("grad-accum", po::value<int64_t>()->default_value(1), "micro-batches per optimizer step")
      ("steps", po::value<int64_t>(), "optimizer steps (default 1000)")
      ("tokens", po::value<int64_t>(), "train on this many tokens instead of --steps")
      ("recipe", po::value<std::string>(), "classic|modern: the training defaults (default classic; on --resume the "
       "run's own): classic = AdamW, cosine, lr 1e-3; modern = Muon + AdamW at 6e-3, warmup-stable-decay, and a "
       "new model with QK-norm (flags given explicitly win; docs/training.md)")
      ("lr", po::value<double>(), "peak learning rate (AdamW's; the recipe's by default: 1e-3 classic, 6e-3 modern)")
      ("min-lr", po::value<double>(), "learning rate at the end of the schedule (default: lr/10 classic, 0 modern)")
      ("warmup-steps", po::value<int64_t>(), "linear warm-up steps (default: steps/20, at most 200)")
      ("cosine-steps", po::value<int64_t>(), "the cosine ends at this step (0 or default: steps; not negative)")
      ("schedule", po::value<std::string>(), "cosine|wsd: the learning-rate schedule after the warm-up (default cosine; "
       "wsd = warmup-stable-decay: constant, then a linear decay over the last --decay-fraction of the steps)")
      ("decay-fraction", po::value<double>(), "--schedule wsd: the share of the steps that decays, in (0, 1] (default: 0.2 "
       "classic, 0.4 modern)")
      ("optimizer", po::value<std::string>(), "adamw|muon (default adamw; on --resume the run's own): muon = Muon for "
       "the blocks' weight matrices, AdamW for the embedding, the head and the gains")
      ("muon-lr", po::value<double>(), "Muon's peak learning rate (default 0.02; the schedule moves it with --lr)")
      ("muon-momentum", po::value<double>()->default_value(0.95, "0.95"), "Muon's momentum μ")
      ("muon-nesterov", po::value<bool>()->default_value(true, "true"), "Muon's Nesterov momentum (true/false)")
      ("muon-ns-steps", po::value<int64_t>()->default_value(5), "Muon's Newton-Schulz steps")
      ("muon-adjust-lr", po::value<std::string>()->default_value("original"), "Muon's lr by shape [A, B]: original "
       "(√max(1, A/B)), match_rms_adamw (0.2·√max(A, B)) or spectral_unclamped (√(A/B))")
      ("muon-weight-decay", po::value<double>()->default_value(0.0, "0"), "Muon's decoupled weight decay")
      ("beta1", po::value<double>()->default_value(0.9, "0.9"), "AdamW β1")
      ("beta2", po::value<double>()->default_value(0.95, "0.95"), "AdamW β2")
      ("eps", po::value<double>()->default_value(1e-8, "1e-8"), "AdamW ε")
      ("weight-decay", po::value<double>()->default_value(0.1, "0.1"), "AdamW weight decay (matrices only)")
      ("grad-clip", po::value<double>()->default_value(1.0, "1.0"), "clip the global gradient norm to this (0: off; not negative)")
      ("seed", po::value<uint64_t>()->default_value(1337), "initialisation and data-order seed")
      ("threads", po::value<int>()->default_value(0), "CPU threads (0: all cores)")
      ("device", po::value<std::string>()->default_value("cpu"), "where to train: cpu, or cuda (cuda:0) in a build with the CUDA backend")
      // run
      ("out", po::value<std::string>(), "run directory: config.json, metrics.jsonl, loss.svg, checkpoints/")
      ("eval-every", po::value<int64_t>()->default_value(0), "evaluate on all validation data every N steps (0: only at the end; not negative)")
      ("loss-plot", po::value<std::string>()->default_value("linear"), "loss.svg's loss axis: linear or log")
      ("eval-at-start", po::bool_switch(), "also evaluate before the first step (step 0: where a fine-tune starts from)")
      ("eval-batch-size", po::value<int64_t>()->default_value(0), "windows per evaluation batch (0: the batch size; not negative)")
      ("checkpoint-every", po::value<int64_t>()->default_value(0), "checkpoint every N steps (0: only at the end; not negative)")
      ("keep-last", po::value<int>()->default_value(3), "step checkpoints kept (best.safetensors is kept apart)")
      ("log-every", po::value<int64_t>()->default_value(1), "a metrics.jsonl line every N steps (N >= 1)")
      ("print-every", po::value<int64_t>()->default_value(0), "a progress line every N steps when stdout is not a terminal (0: steps/50; not negative)")
      ("resume", po::value<std::string>()->implicit_value(""), "continue a run: from the newest checkpoint in --out, or from the given one")
      ("init-from", po::value<std::string>(), "start from the weights of this checkpoint or run directory (ours, or what "
       "`import llama2c`/`import hf` wrote): its model config and tokenizer, a fresh optimizer, step 0 and this run's schedule")
      ("detect-anomaly", po::bool_switch(), "name the tape entry that first produces a NaN/Inf (slower)")
      ("cuda-graph", po::value<std::string>()->default_value("off"), "on|off: after one eager warm-up step, "
       "capture the training step (forward, backward, clipping, AdamW) as CUDA graphs and replay them (--device "
       "cuda only; the same numbers as off, fewer launches)")
      ("dry-run", po::bool_switch(), "print the memory estimate (and whether the run fits) and exit: nothing is "
       "trained or written")
      ("force", po::bool_switch(), "start even when the memory estimate exceeds what the machine (or GPU) has")
      ("distributed", po::bool_switch(), "data-parallel training on the ranks of `mpirun -np N tapegrad train ...` "
       "(MPI; NCCL with --device cuda): --batch-size is the global batch, split evenly; rank 0 prints and writes "
       "the run directory")
      ("dist-timeout", po::value<double>()->default_value(300),
       "seconds a collective may wait for the other ranks before the job is aborted (a rank died or hangs)");
}

template <class T>
std::optional<T> get(const po::variables_map& vm, const char* key) {
  if (!vm.count(key)) return std::nullopt;
  return vm[key].as<T>();
}

// The modern options given as flags, written into c.
void apply_architecture_flags(const po::variables_map& vm, nn::TransformerLMConfig& c) {
  if (auto v = get<std::string>(vm, "ffn")) c.ffn = nn::ffn_kind_from_string(*v);
  if (auto v = get<bool>(vm, "qk-norm")) c.qk_norm = *v;
  if (auto v = get<bool>(vm, "norm-gain")) c.norm_gain = *v;
  if (auto v = get<bool>(vm, "embed-norm")) c.embed_norm = *v;
  if (auto v = get<bool>(vm, "zero-init-projections")) c.zero_init_projections = *v;
  if (auto v = get<double>(vm, "logit-softcap")) {
    TG_CHECK(*v >= 0 && std::isfinite(*v), "--logit-softcap must be a finite number ≥ 0 (0: none), but is {}", *v);
    c.logit_softcap = *v;
  }
}

// The model config: a preset's fields and the recipe's architecture, then every field given on the command line
// or in --config.
nn::TransformerLMConfig model_config(const po::variables_map& vm, int64_t data_vocab, const lm::TrainRecipe& recipe) {
  nn::TransformerLMConfig c;
  if (auto name = get<std::string>(vm, "model")) {
    c = lm::preset_config(*name);
  } else {
    c.context_length = 256, c.d_model = 256, c.n_layers = 4, c.n_heads = 8;  // `small`'s shape
  }
  lm::apply_recipe_architecture(recipe, c);
  apply_architecture_flags(vm, c);
  c.vocab_size = get<int64_t>(vm, "vocab-size").value_or(data_vocab > 0 ? data_vocab : c.vocab_size);
  if (auto v = get<int64_t>(vm, "context")) c.context_length = *v;
  if (auto v = get<int64_t>(vm, "d-model")) c.d_model = *v;
  if (auto v = get<int64_t>(vm, "layers")) c.n_layers = *v;
  if (auto v = get<int64_t>(vm, "heads")) c.n_heads = *v;
  c.n_kv_heads = get<int64_t>(vm, "kv-heads").value_or(c.n_heads);
  if (auto v = get<int64_t>(vm, "d-ff")) c.d_ff = *v;
  else if (!vm.count("model")) c.d_ff = 0;  // default 8/3·d_model
  if (auto v = get<double>(vm, "rope-theta")) c.rope_theta = *v;
  if (auto v = get<bool>(vm, "tie-embeddings")) c.tie_embeddings = *v;
  TG_CHECK(c.vocab_size > 0, "the vocabulary size is unknown: give --tokenizer, a token file, or --vocab-size");
  TG_CHECK(c.n_heads > 0 && c.d_model > 0 && c.d_model % c.n_heads == 0,
           "--heads {} must divide --d-model {}", c.n_heads, c.d_model);
  TG_CHECK(c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0, "--kv-heads {} must divide --heads {}", c.n_kv_heads,
           c.n_heads);
  TG_CHECK(c.context_length > 0, "--context must be positive, but is {}", c.context_length);
  TG_CHECK(c.n_layers > 0, "--layers must be positive, but is {}", c.n_layers);
  return c;
}

// Reconstructs the command line with --resume, for the "how to continue" line.
std::string resume_command(Args args) {
  std::string cmd = "tapegrad train";
  bool has_resume = false;
  for (char* a : args) {
    const std::string s = a;
    has_resume |= s.starts_with("--resume");
    cmd += " " + (s.find_first_of(" '\"$") == std::string::npos ? s : "'" + s + "'");
  }
  return has_resume ? cmd : cmd + " --resume";
}


// --init-from: the checkpoint's model config. A model option given as well must say the same (a preset is
// refused: the checkpoint is the model).
nn::TransformerLMConfig init_from_config(const po::variables_map& vm, const optim::Checkpoint& ck,
                                         const std::string& path) {
  TG_CHECK(!vm.count("model"), "--model {} and --init-from: the model comes from the checkpoint '{}' (leave --model out)",
           vm["model"].as<std::string>(), path);
  nn::TransformerLMConfig c;
  try {
    c = nn::TransformerLMConfig::from_config_map(ck.config);
  } catch (const Error& e) {
    throw Error(fmt::format("--init-from '{}' does not hold a TransformerLM config: {}", path, e.what()));
  }
  lm::check_model_allocation(c, double(lm::checkpoint_parameter_count(ck)), fmt::format("--init-from '{}'", path));
  auto same = [&](const char* flag, auto given, auto theirs) {
    TG_CHECK(given == theirs, "--{} {} contradicts --init-from '{}', whose model has {} = {} (leave --{} out)", flag,
             given, path, flag, theirs, flag);
  };
  if (auto v = get<int64_t>(vm, "vocab-size")) same("vocab-size", *v, c.vocab_size);
  if (auto v = get<int64_t>(vm, "context")) same("context", *v, c.context_length);
  if (auto v = get<int64_t>(vm, "d-model")) same("d-model", *v, c.d_model);
  if (auto v = get<int64_t>(vm, "layers")) same("layers", *v, c.n_layers);
  if (auto v = get<int64_t>(vm, "heads")) same("heads", *v, c.n_heads);
  if (auto v = get<int64_t>(vm, "kv-heads")) same("kv-heads", *v, c.n_kv_heads);
  if (auto v = get<int64_t>(vm, "d-ff")) same("d-ff", *v, c.d_ff);
  if (auto v = get<double>(vm, "rope-theta")) same("rope-theta", *v, c.rope_theta);
  if (auto v = get<bool>(vm, "tie-embeddings")) same("tie-embeddings", *v, c.tie_embeddings);
  if (auto v = get<std::string>(vm, "ffn")) same("ffn", *v, std::string(nn::ffn_kind_name(c.ffn)));
  if (auto v = get<bool>(vm, "qk-norm")) same("qk-norm", *v, c.qk_norm);
  if (auto v = get<bool>(vm, "norm-gain")) same("norm-gain", *v, c.norm_gain);
  if (auto v = get<bool>(vm, "embed-norm")) same("embed-norm", *v, c.embed_norm);
  if (auto v = get<double>(vm, "logit-softcap")) same("logit-softcap", *v, c.logit_softcap);
  return c;
}

int train(Args args, const po::variables_map& vm, const std::shared_ptr<dist::Communicator>& comm);

}  // namespace

int cmd_train(Args args) {
  po::options_description opts("tapegrad train options");
  add_options(opts);
  add_precision_option(opts, "training");
  po::variables_map vm;
  if (!parse(args, opts, vm, kUsage)) return 0;
  if (!vm["distributed"].as<bool>()) return train(args, vm, nullptr);
  const double timeout = vm["dist-timeout"].as<double>();
  TG_CHECK(std::isfinite(timeout) && timeout > 0, "--dist-timeout must be a positive number of seconds, but is {}",
           timeout);
  const Device device = parse_device_flag(vm["device"].as<std::string>());
  std::shared_ptr<dist::Communicator> comm = dist::mpi_world({.timeout_s = timeout});
  // One progress line and one set of messages: rank 0's (the others' stdout goes nowhere).
  if (comm->rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) comm->abort(2);
  if (device.type == DeviceType::CUDA) {
    if (dist::nccl_built()) {
      try {
        comm = dist::nccl_world(comm, device, {.timeout_s = timeout});  // set up over MPI
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tapegrad: rank %d: %s\n", comm->rank(), e.what());
        comm->abort(2);
      }
    } else if (comm->rank() == 0) {
      std::fprintf(stderr, "tapegrad: note: this build has no NCCL: the gradients of --device %s go through the "
                   "host over MPI (slow)\n", vm["device"].as<std::string>().c_str());
    }
  }
  try {
    return train(args, vm, comm);
  } catch (const std::exception& e) {
    // The other ranks would wait for this one in their next collective: say what happened, end the job.
    std::fprintf(stderr, "tapegrad: rank %d of %d: %s\n", comm->rank(), comm->world_size(), e.what());
    comm->abort(2);
  }
  return 2;  // (not reached: abort ends the process)
}

namespace {

int train(Args args, const po::variables_map& vm, const std::shared_ptr<dist::Communicator>& comm) {
  const bool rank0 = !comm || comm->rank() == 0;
  set_threads(vm["threads"].as<int>());
  (void)parse_device_flag(vm["device"].as<std::string>());  // refused before any work
  print_blas_advice();

  TG_CHECK(vm.count("out"), "--out DIR is required (the run directory)");
  const std::string out = vm["out"].as<std::string>();
  TG_CHECK(vm.count("text") + vm.count("train") + vm.count("sft") == 1,
           "give one of --text FILE, --train TOKENS.bin or --sft FILE.jsonl (not several, not none)");
  TG_CHECK(!(vm.count("sft") && vm.count("val")), "--val goes with --train; --sft takes --sft-val");
  TG_CHECK(!vm.count("sft-val") || vm.count("sft"), "--sft-val goes with --sft");
  TG_CHECK(!(vm.count("text") && vm.count("val")), "--val goes with --train; --text holds out its own validation part");
  TG_CHECK(!(vm.count("steps") && vm.count("tokens")), "give --steps or --tokens, not both");
  const int64_t print_every = vm["print-every"].as<int64_t>();
  TG_CHECK(print_every >= 0, "--print-every must be >= 0 (0: steps/50), but is {}", print_every);

  // --init-from: another model's weights, with its config and tokenizer. A resumed fine-tuning run has its
  // own weights in its checkpoint: there the flag (kept by the "resume with" line) changes nothing.
  std::string init_from;
  std::optional<optim::Checkpoint> init_ck;
  if (vm.count("init-from") && !vm.count("resume")) {
    init_from = checkpoint_flag(vm["init-from"].as<std::string>());
    init_ck = optim::read_checkpoint(init_from);
  }

  // Resuming: which checkpoint, and (when no model option is given) the model config it holds.
  std::string resume_from;
  std::optional<optim::Checkpoint> resume_ck;  // read once: for its config here and by the trainer
  if (vm.count("resume")) {
    resume_from = vm["resume"].as<std::string>();
    if (resume_from.empty()) {
      auto newest = lm::newest_checkpoint(out);
      TG_CHECK(newest.has_value(), "--resume: '{}' holds no checkpoint to resume from", out);
      resume_from = *newest;
    }
    resume_ck = optim::read_checkpoint(resume_from);
  }
  // The tokenizer (lm/text_tokenizer.h: a BPE tokenizer.json or llama2.c's tokenizer.bin): --tokenizer, else the
  // resumed run's own, else the one that came with --init-from's checkpoint (its run directory's tokenizer.json or,
  // for a model from `import llama2c`, tokenizer.bin). With a checkpoint, a given BPE --tokenizer must be the one it
  // was trained with (same fingerprint).
  std::optional<lm::TextTokenizer> tokenizer;
  {
    const std::string flag = vm.count("tokenizer") ? vm["tokenizer"].as<std::string>() : "";
    const optim::Checkpoint* from = resume_ck ? &*resume_ck : init_ck ? &*init_ck : nullptr;
    const std::string& from_path = resume_ck ? resume_from : init_from;
    if (from) {
      const std::string run = lm::run_dir_of_checkpoint(from_path);
      const bool has_own = lm::checkpoint_uses_llama2c_tokenizer(*from) ||
                           (!run.empty() && std::filesystem::exists(std::filesystem::path(run) / "tokenizer.json"));
      if (!flag.empty() || has_own) tokenizer.emplace(lm::text_tokenizer_for_checkpoint(*from, from_path, flag));
    } else if (!flag.empty()) {
      tokenizer.emplace(lm::load_text_tokenizer(flag));
    }
  }
  const data::BpeModel* bpe = tokenizer ? tokenizer->bpe_model() : nullptr;
  const bool llama2c = tokenizer && tokenizer->kind() == lm::TokenizerKind::Llama2c;
  TG_CHECK(!vm.count("text") || tokenizer,
           "--text needs --tokenizer (a tokenizer.json or llama2.c's tokenizer.bin; train one with: tapegrad tokenize "
           "train)");

  // The data, kept alive for the trainer.
  std::unique_ptr<data::TokenFile> train_file, val_file;
  lm::TokenizedText text;
  std::optional<data::TokenSource> train_src, val_src;
  std::map<std::string, std::string> run_info;
  const int threads = num_threads();
  if (vm.count("text")) {
    const auto given = vm["text"].as<std::vector<std::string>>();
    const std::vector<data::TextInput> inputs = data::resolve_text_inputs(given, "--text");
    lm::TextInputOptions text_options;
    text_options.text_field = vm["text-field"].as<std::string>();
    text_options.val_fraction = vm["val-fraction"].as<double>();
    TG_CHECK(text_options.val_fraction >= 0 && text_options.val_fraction < 1,
             "--val-fraction must be in [0, 1) (0: no validation), but is {}", text_options.val_fraction);
    BytesProgress tokenizing;
    if (rank0) text_options.progress = [&](uint64_t done, uint64_t total) { tokenizing.update(done, total); };
    text = lm::tokenize_text_inputs(inputs, tokenizer->document_separator(), tokenizer->document_encoder(threads),
                                    text_options);
    tokenizing.finish();
    const std::string path = data::describe_inputs(given);
    const std::string held_out =
        text.val_by_tokens ? fmt::format("{} validation tokens (the last {:g} % of the tokens: the text is one document)",
                                         text.val.size(), 100 * text_options.val_fraction)
        : text.val.empty() ? std::string("no validation part (--val-fraction 0)")
                           : fmt::format("{} validation tokens ({} documents)", text.val.size(), text.val_documents);
    fmt::print("text {}{}: {:.2f} MB → {} training tokens ({} document{}), {}\n", path,
               inputs.size() > 1 ? fmt::format(" ({} files)", inputs.size()) : "", double(text.bytes) / 1e6,
               text.train.size(), text.train_documents, text.train_documents == 1 ? "" : "s", held_out);
    train_src.emplace(std::span<const uint32_t>(text.train));
    if (!text.val.empty()) val_src.emplace(std::span<const uint32_t>(text.val));
    run_info["text"] = path;
  } else if (vm.count("train")) {
    train_file = std::make_unique<data::TokenFile>(vm["train"].as<std::string>());
    train_src.emplace(*train_file);
    run_info["train"] = vm["train"].as<std::string>();
    if (vm.count("val")) {
      val_file = std::make_unique<data::TokenFile>(vm["val"].as<std::string>());
      val_src.emplace(*val_file);
      run_info["val"] = vm["val"].as<std::string>();
    }
  }
  // loss.svg: the axis, and the unigram entropy as the line a model must get below to use its context.
  lm::LossPlotOptions plot;
  {
    const std::string axis = vm["loss-plot"].as<std::string>();
    TG_CHECK(axis == "linear" || axis == "log", "--loss-plot must be linear or log, but is '{}'", axis);
    plot.log_scale = axis == "log";
  }
  if (train_src) {  // (--sft reads its examples once the model's context is known, below)
    plot.reference_loss = lm::unigram_entropy(*train_src);
    plot.reference_label = "no context (unigram entropy)";
    fmt::print("unigram entropy of the training tokens: {:.4f} nats/token (the loss of a model that ignores context)\n",
               plot.reference_loss);
  }
  const int64_t data_vocab = tokenizer ? int64_t(tokenizer->vocab_size()) : train_file ? int64_t(train_file->vocab_size()) : 0;

  // --recipe: the defaults of the flags below and of a new model's architecture (a flag given explicitly wins); on
  // --resume the run's own.
  std::string recipe_name = "classic";
  if (vm.count("recipe")) recipe_name = vm["recipe"].as<std::string>();
  else if (resume_ck && resume_ck->extra.count("run.recipe")) recipe_name = resume_ck->extra.at("run.recipe");
  const lm::TrainRecipe& recipe = lm::train_recipe(recipe_name);
  bool model_flags = false;
  for (const char* f : kModelFlags) model_flags |= vm.count(f) > 0;
  nn::TransformerLMConfig config;
  if (resume_ck && !model_flags) {
    config = nn::TransformerLMConfig::from_config_map(resume_ck->config);
    lm::check_model_allocation(config, double(lm::checkpoint_parameter_count(*resume_ck)),
                               fmt::format("--resume '{}'", resume_from));
  } else if (init_ck) {
    config = init_from_config(vm, *init_ck, init_from);
  } else {
    config = model_config(vm, data_vocab, recipe);
  }
  // The chat template (lm/chat_template.h): the one the starting checkpoint was instruction-tuned with; for --sft
  // else the tokenizer's own special tokens, or 4 ids appended to its vocabulary — the model's vocabulary grows by as
  // many rows (Trainer::init_from: the mean of the existing rows).
  std::optional<lm::ChatTemplate> chat;
  if (resume_ck) chat = lm::chat_template_for_checkpoint(*resume_ck);
  else if (init_ck) chat = lm::chat_template_for_checkpoint(*init_ck);
  std::unique_ptr<lm::TextCodec> sft_codec;
  if (vm.count("sft")) {
    TG_CHECK(tokenizer, "--sft needs a tokenizer: --tokenizer, or --init-from a checkpoint whose run directory has one");
    sft_codec = tokenizer->codec();
    if (!chat && bpe) chat = lm::chat_template_in_tokenizer(*bpe);
    if (!chat) chat = lm::ChatTemplate::appended(sft_codec->vocab_size());
    TG_CHECK(int64_t(chat->vocab_size()) >= config.vocab_size,
             "--sft: the model's vocabulary ({}) is larger than the tokenizer's {} + the chat template's {} tokens",
             config.vocab_size, chat->tokenizer_vocab, chat->added_tokens);
    config.vocab_size = int64_t(chat->vocab_size());
  }
  // One vocabulary for both, as `generate` and `eval` require of the checkpoint and its tokenizer.
  if (tokenizer)
    TG_CHECK(int64_t(tokenizer->vocab_size()) + (chat ? chat->added_tokens : 0) == config.vocab_size,
             "the tokenizer has {} tokens but the model's vocabulary is {}: another tokenizer? (--vocab-size must match it)",
             tokenizer->vocab_size(), config.vocab_size);

  lm::TrainOptions o;
  const lm::ModelPreset* preset = vm.count("model") ? &lm::model_preset(vm["model"].as<std::string>()) : nullptr;
  o.batch_size = get<int64_t>(vm, "batch-size").value_or(preset ? preset->batch_size : 32);
  o.grad_accum = vm["grad-accum"].as<int64_t>();
  const int64_t tokens_per_step = o.batch_size * o.grad_accum * config.context_length;
  o.steps = vm.count("tokens") ? (vm["tokens"].as<int64_t>() + tokens_per_step - 1) / tokens_per_step
                               : get<int64_t>(vm, "steps").value_or(1000);
  run_info["recipe"] = recipe.name;
  o.lr = get<double>(vm, "lr").value_or(recipe.lr);
  o.min_lr = get<double>(vm, "min-lr").value_or(o.lr * recipe.min_lr_ratio);
  o.warmup_steps = get<int64_t>(vm, "warmup-steps").value_or(std::min<int64_t>(200, o.steps / 20));
  o.cosine_steps = get<int64_t>(vm, "cosine-steps").value_or(0);
  // The optimizer and schedule: the flag, else on --resume the run's own (its checkpoint's train.<key>), else the
  // recipe's.
  auto from_run = [&](const char* flag, const char* key, const char* fallback) {
    if (vm.count(flag)) return vm[flag].as<std::string>();
    const std::string stored = std::string("train.") + key;
    if (resume_ck && resume_ck->extra.count(stored)) return resume_ck->extra.at(stored);
    return std::string(fallback);
  };
  o.optimizer =
      optim::parse_optimizer_kind(from_run("optimizer", "optimizer", optim::optimizer_kind_name(recipe.optimizer)));
  o.schedule =
      optim::parse_schedule_kind(from_run("schedule", "schedule", optim::schedule_kind_name(recipe.schedule)));
  o.decay_fraction = get<double>(vm, "decay-fraction").value_or(recipe.decay_fraction);
  o.muon_lr = get<double>(vm, "muon-lr").value_or(recipe.muon_lr);
  o.muon_momentum = vm["muon-momentum"].as<double>();
  o.muon_nesterov = vm["muon-nesterov"].as<bool>();
  o.muon_ns_steps = vm["muon-ns-steps"].as<int64_t>();
  o.muon_adjust_lr = optim::parse_muon_lr_adjust(vm["muon-adjust-lr"].as<std::string>());
  o.muon_weight_decay = vm["muon-weight-decay"].as<double>();
  o.beta1 = vm["beta1"].as<double>();
  o.beta2 = vm["beta2"].as<double>();
  o.eps = vm["eps"].as<double>();
  o.weight_decay = vm["weight-decay"].as<double>();
  o.grad_clip = vm["grad-clip"].as<double>();
  o.seed = vm["seed"].as<uint64_t>();
  o.device = parse_device_flag(vm["device"].as<std::string>());
  o.precision = precision_flag(vm, Device::cpu());  // the Trainer sets TF32 on a GPU
  o.out_dir = out;
  o.eval_every = vm["eval-every"].as<int64_t>();
  o.eval_at_start = vm["eval-at-start"].as<bool>();
  o.eval_batch_size = vm["eval-batch-size"].as<int64_t>();
  o.checkpoint_every = vm["checkpoint-every"].as<int64_t>();
  o.keep_last = vm["keep-last"].as<int>();
  o.log_every = vm["log-every"].as<int64_t>();
  o.detect_anomaly = vm["detect-anomaly"].as<bool>();
  o.cuda_graph = lm::parse_cuda_graph_flag(vm["cuda-graph"].as<std::string>());
  run_info["threads"] = fmt::format("{}", threads);
  if (preset) run_info["model_preset"] = preset->name;
  if (llama2c) {
    run_info["tokenizer_kind"] = "llama2c";
    run_info["tokenizer"] = (std::filesystem::path(out) / "tokenizer.bin").string();
  }
  if (resume_ck)  // what the run's first start recorded of its origin stays in every later checkpoint
    for (const char* key : {"init_from", "tokenizer_kind", "tokenizer"})
      if (!run_info.count(key) && resume_ck->extra.count(std::string("run.") + key))
        run_info[key] = resume_ck->extra.at(std::string("run.") + key);
  if (bpe) {
    run_info["tokenizer"] = (std::filesystem::path(out) / "tokenizer.json").string();
    run_info["tokenizer_source"] = tokenizer->source();
    run_info["tokenizer_fingerprint"] = data::tokenizer_fingerprint(*bpe);
  }
  // --sft: the examples, rendered with the chat template; an example longer than the context is refused (file:line).
  std::optional<lm::SftData> sft;
  if (vm.count("sft")) {
    sft.emplace();
    const std::string path = vm["sft"].as<std::string>();
    const size_t max_ids = size_t(config.context_length) + 1;
    sft->train = lm::read_sft_jsonl(path, *sft_codec, *chat, max_ids);
    if (vm.count("sft-val")) {
      sft->val = lm::read_sft_jsonl(vm["sft-val"].as<std::string>(), *sft_codec, *chat, max_ids);
      run_info["sft_val"] = vm["sft-val"].as<std::string>();
    } else {
      // A seeded random subset (lm/sft_data.h), the same on --resume: the seed the run's first start recorded.
      uint64_t val_seed = o.seed;
      if (resume_ck && resume_ck->extra.count("run.sft_val_seed"))
        val_seed = parse_number<uint64_t>(resume_ck->extra.at("run.sft_val_seed"),
                                          fmt::format("checkpoint '{}': run.sft_val_seed", resume_from));
      sft->val = lm::hold_out_examples(sft->train, vm["val-fraction"].as<double>(), val_seed);
      run_info["sft_val_seed"] = fmt::format("{}", val_seed);
    }
    TG_CHECK(!sft->train.empty(), "--sft {}: every example is held out (lower --val-fraction)", path);
    sft->pad_id = chat->end_id;
    size_t answers = 0;
    for (const lm::SftExample& ex : sft->train) answers += ex.answer_tokens();
    fmt::print("sft {}: {} training examples ({} answer tokens), {} held out; chat template {} {} {} {} = ids {} {} {} "
               "{}{}\n",
               path, sft->train.size(), answers, sft->val.size(), lm::kSystemToken, lm::kUserToken,
               lm::kAssistantToken, lm::kEndToken, chat->system_id, chat->user_id, chat->assistant_id, chat->end_id,
               chat->added_tokens ? fmt::format(" (appended to the tokenizer's {})", chat->tokenizer_vocab) : "");
    {  // one batch shape for the run (lm/sft_data.h): how much of it the examples fill
      const size_t row = lm::longest_sft_row({&sft->train, &sft->val});
      double filled = 0;
      for (const lm::SftExample& ex : sft->train) filled += double(ex.ids.size() - 1) / double(row);
      fmt::print("sft batches: every row padded to {} positions (the longest example); the examples fill {:.0f} % of "
                 "them on average\n", row, 100 * filled / double(sft->train.size()));
    }
    if (const auto groups = lm::sft_groups(sft->val); groups.size() > 1) {  // the held-out loss is reported per task
      std::string line = fmt::format("held-out examples by task ({} tasks):", groups.size());
      for (const std::string& group : groups) {
        const auto n = std::count_if(sft->val.begin(), sft->val.end(), [&](const auto& ex) { return ex.group == group; });
        line += fmt::format(" {} {},", group.size() > 24 ? group.substr(0, 24) + "…" : group, n);
      }
      line.back() = '\n';
      fmt::print("{}", line);
    }
    run_info["sft"] = path;
    const std::string base_vocab =
        init_ck && init_ck->config.count("vocab_size") ? init_ck->config.at("vocab_size") : std::string();
    if (!base_vocab.empty() && base_vocab != fmt::format("{}", config.vocab_size))
      fmt::print("the vocabulary grows from {} to {}: the new embedding (and lm_head) rows are the mean of the old "
                 "ones\n", base_vocab, config.vocab_size);
  }
  if (chat) chat->to_run_info(run_info);  // every checkpoint remembers the template (generate, chat)
  o.run_info = run_info;

  o.validate();  // a bad option is named as itself, not as a failure of the estimate below
  // The memory this run will need (lm/memory_estimate.h), before anything is allocated: printed by every start;
  // --dry-run ends here with nothing written; a run that does not fit is refused unless --force.
  {
    lm::TrainOptions per_rank = o;  // each rank of a distributed run holds its slice of the batch
    if (comm) per_rank.batch_size = std::max<int64_t>(1, o.batch_size / comm->world_size());
    int64_t longest_row = 0;  // --sft: a batch is as long as its longest example (less the last id)
    if (sft)
      for (const auto* set : {&sft->train, &sft->val})
        for (const lm::SftExample& ex : *set) longest_row = std::max(longest_row, int64_t(ex.ids.size()) - 1);
    const lm::MemoryEstimate memory =
        lm::estimate_training_memory(config, per_rank, lm::process_rss_bytes(), threads, longest_row);
    const auto capacity = lm::memory_capacity(o.device);
    fmt::print("{}", lm::format_memory_table(memory, o.device, capacity));
    if (vm["dry-run"].as<bool>()) {
      try {
        lm::check_memory_fits(memory, o.device, capacity, /*force=*/false);
        fmt::print("dry run: the run fits; nothing was trained or written\n");
      } catch (const Error& e) {
        fmt::print("dry run: the run would be refused: {}\n", e.what());
      }
      return 0;
    }
    lm::check_memory_fits(memory, o.device, capacity, vm["force"].as<bool>());
  }

  std::unique_ptr<lm::Trainer> trainer_holder =
      sft ? std::make_unique<lm::Trainer>(config, o, std::move(*sft), comm)
          : std::make_unique<lm::Trainer>(config, o, *train_src, val_src, comm);
  lm::Trainer& trainer = *trainer_holder;
  // Bits per byte of the validation text (lm/bits_per_byte.h), where the run knows its tokenizer.
  if (!sft && tokenizer) trainer.set_token_byte_lengths(tokenizer->byte_lengths(size_t(config.vocab_size)));
  trainer.set_plot_options(plot);
  if (init_ck) {
    trainer.init_from(*init_ck, init_from);
    fmt::print("initialised from {} (step {} of its run); optimizer, step and schedule start afresh\n", init_from,
               init_ck->step);
  }
  if (!resume_from.empty()) {
    trainer.resume(*resume_ck, resume_from);
    fmt::print("resumed from {} at step {}\n", resume_from, trainer.step());
  }
  if (rank0 && bpe && !std::filesystem::exists(std::filesystem::path(out) / "tokenizer.json"))
    data::save_hf_tokenizer_json(*bpe, (std::filesystem::path(out) / "tokenizer.json").string());
  // llama2.c's tokenizer goes with the model, as with an import (generate, eval and chat find it there).
  const std::string run_tokenizer_bin = (std::filesystem::path(out) / "tokenizer.bin").string();
  if (rank0 && llama2c && !std::filesystem::exists(run_tokenizer_bin))
    data::write_file_atomic(run_tokenizer_bin, data::read_whole_file(tokenizer->source(), "the tokenizer.bin"), "train");

  const double flops = lm::flops_per_token(trainer.model().config);
  const Device device = o.device;
  const double sgemm = lm::measure_matmul_gflops(0, 3, device);  // the ceiling on the training device
  const nn::TransformerLMConfig& mc = trainer.model().config;
  fmt::print("model: {} parameters (V {} T {} C {} L {} H {} Hkv {} F {}), {:.2f} MFLOP/token; batch {}×{}×{} = {} "
             "tokens/step, {} steps; sgemm {:.1f} GFLOP/s on {}\n",
             trainer.model().num_parameters(), mc.vocab_size, mc.context_length, mc.d_model, mc.n_layers, mc.n_heads,
             mc.n_kv_heads, mc.d_ff, flops / 1e6, o.batch_size, o.grad_accum, mc.context_length, tokens_per_step,
             o.steps, sgemm, device.type == DeviceType::CPU ? fmt::format("{} threads", threads) : device.str());

  install_stop_signals();
  ProgressLine progress(flops, sgemm, print_every > 0 ? print_every : std::max<int64_t>(1, o.steps / 50));
  lm::TrainCallbacks cb;
  cb.on_step = [&](const lm::StepStats& s) { progress.step(s); };
  cb.on_eval = [&](const lm::EvalStats& e) { progress.eval(e); };
  cb.should_stop = [] { return stop_signal() != 0; };
  const lm::TrainResult r = trainer.run(cb);
  progress.finish();
  switch (r.status) {
    case lm::TrainStatus::Completed:
      fmt::print("done: {} steps, {} tokens; checkpoint {}\n", r.step, trainer.tokens_seen(), r.last_checkpoint);
      if (r.last_eval)
        fmt::print("final validation loss {:.4f}, perplexity {:.2f}{} ({} tokens)\n", r.last_eval->loss,
                   r.last_eval->perplexity,
                   r.last_eval->bytes ? fmt::format(", {:.4f} bits/byte", r.last_eval->bits_per_byte) : "",
                   r.last_eval->tokens);
      fmt::print("run directory {}: metrics.jsonl, loss.svg, config.json, checkpoints/\n", out);
      return 0;
    case lm::TrainStatus::Stopped: {
      const int sig = stop_signal() != 0 ? stop_signal() : SIGTERM;  // (another rank's signal)
      if (rank0)
        std::fprintf(stderr, "tapegrad: %s by %s; checkpoint %s\n  resume with: %s\n", r.message.c_str(),
                   sig == SIGINT ? "Ctrl-C" : "SIGTERM", r.last_checkpoint.c_str(), resume_command(args).c_str());
      return 128 + sig;
    }
    case lm::TrainStatus::Diverged: {
      const auto newest = lm::newest_checkpoint(out);
      if (rank0)
        std::fprintf(stderr, "tapegrad: training diverged: %s; the newest checkpoint is %s%s\n", r.message.c_str(),
                   newest ? newest->c_str() : "(none)", o.detect_anomaly ? "" : " (rerun with --detect-anomaly to find the op)");
      return 3;
    }
  }
  return 0;
}

}  // namespace

}  // namespace tapegrad::cli
