// cmd_eval.cpp — `tapegrad eval`: mean loss and perplexity of a checkpoint over a whole token file
// or text file (lm::evaluate: sequential windows, no tape).
//   tapegrad eval --checkpoint run/checkpoints/best.safetensors --text story.txt
#include <fmt/format.h>

#include <memory>

#include "data/file_io.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "lm/evaluate.h"
#include "lm/model_io.h"
#include "lm/quantized_model.h"
#include "lm/text_split.h"
#include "lm/trainer.h"
#include "optim/checkpoint.h"
#include "tools/commands.h"

namespace tapegrad::cli {

int cmd_eval(Args args) {
  po::options_description opts("tapegrad eval options");
  opts.add_options()("checkpoint", po::value<std::string>()->required(), "checkpoint file (.safetensors)")(
      "data", po::value<std::string>(), "token file to evaluate on")(
      "text", po::value<std::string>(), "text file to evaluate on (tokenized with the run's tokenizer)")(
      "tokenizer", po::value<std::string>(), "--text: tokenizer.json or folder (default: the run's tokenizer.json)")(
      "held-out", po::value<double>(), "--text: only the last documents, this fraction of them (0.1: the part `train --text` held out)")(
      "batch-size", po::value<int64_t>()->default_value(8), "windows per batch")(
      "context", po::value<int64_t>()->default_value(0), "window length (0: the model's context)")(
      "threads", po::value<int>()->default_value(0), "CPU threads (0: all cores)");
  po::variables_map vm;
  if (!parse(args, opts, vm, "tapegrad eval --checkpoint C (--data TOKENS.bin | --text FILE)")) return 0;
  set_threads(vm["threads"].as<int>());
  TG_CHECK(vm.count("data") != vm.count("text"), "give either --data TOKENS.bin or --text FILE");
  TG_CHECK(!vm.count("held-out") || vm.count("text"), "--held-out goes with --text");

  const std::string path = vm["checkpoint"].as<std::string>();
  const lm::InferenceModel loaded = lm::load_inference_model(path);  // a training checkpoint or an int8 model
  const optim::Checkpoint& ck = loaded.info;
  const auto& model = loaded.model;
  const int64_t context = vm["context"].as<int64_t>();
  TG_CHECK(context <= model->config.context_length, "--context {} is longer than the model's context length {}",
           context, model->config.context_length);

  std::unique_ptr<data::TokenFile> file;
  std::vector<uint32_t> ids;
  std::optional<data::TokenSource> source;
  std::string what;
  if (vm.count("data")) {
    what = vm["data"].as<std::string>();
    file = std::make_unique<data::TokenFile>(what);
    source.emplace(*file);
  } else {
    what = vm["text"].as<std::string>();
    data::Tokenizer tok(lm::tokenizer_for_checkpoint(ck, path, vm.count("tokenizer") ? vm["tokenizer"].as<std::string>() : ""));
    const std::string text = data::read_whole_file(what, "--text");
    std::string_view part = text;
    if (vm.count("held-out")) {
      const lm::TextSplit split = lm::split_documents(text, lm::document_separator(tok), vm["held-out"].as<double>());
      part = split.val;
      what += fmt::format(" (its last {} documents)", split.val_documents);
    }
    ids = tok.encode_parallel(part, num_threads());
    source.emplace(std::span<const uint32_t>(ids));
  }
  const uint64_t max_id = lm::max_token_id_plus_one(*source);
  TG_CHECK(max_id <= uint64_t(model->config.vocab_size),
           "'{}' holds token id {}, outside the vocabulary of checkpoint '{}' ({} tokens)", what, max_id - 1, path,
           model->config.vocab_size);
  const lm::EvalResult r = lm::evaluate(*model, *source, vm["batch-size"].as<int64_t>(), context);
  fmt::print("checkpoint {} (step {}) on {}:\n  loss {:.4f} nats/token  perplexity {:.3f}  tokens evaluated {} ({} windows)\n",
             path, ck.step, what, r.loss, r.perplexity, r.tokens, r.windows);
  return 0;
}

}  // namespace tapegrad::cli
