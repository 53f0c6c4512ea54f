// cmd_eval.cpp — `tapegrad eval`: mean loss and perplexity of a checkpoint over a whole token file
// or text file (lm::evaluate: sequential windows, no tape).
//   tapegrad eval --checkpoint run/checkpoints/best.safetensors --text story.txt
//   tapegrad eval --checkpoint run --text story.txt --device cuda   (the model and its batches on the GPU)
//   tapegrad eval --checkpoint run --choices hellaswag_val.jsonl   (multiple choice: lm/multiple_choice.h)
#include <fmt/format.h>

#include <memory>

#include "data/file_io.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "lm/bits_per_byte.h"
#include "lm/evaluate.h"
#include "lm/model_io.h"
#include "lm/multiple_choice.h"
#include "lm/quantized_model.h"
#include "lm/text_split.h"
#include "lm/text_tokenizer.h"
#include "lm/trainer.h"
#include "optim/checkpoint.h"
#include "tools/commands.h"
#include "tools/progress.h"

namespace tapegrad::cli {

int cmd_eval(Args args) {
  po::options_description opts("tapegrad eval options");
  opts.add_options()("checkpoint", po::value<std::string>()->required(), "checkpoint file (.safetensors), or a run directory (its best checkpoint, else its newest)")(
      "data", po::value<std::string>(), "token file to evaluate on")(
      "choices", po::value<std::string>(), "multiple-choice JSONL in HellaSwag's format (ctx, endings, label): accuracy "
      "of picking the ending with the lowest mean loss per token")(
      "text", po::value<std::vector<std::string>>()->multitoken(), "text files, directories and JSONL files to evaluate on, in order (tokenized with the run's tokenizer)")(
      "text-field", po::value<std::string>()->default_value("text"), "--text: the JSONL field that holds each document")(
      "tokenizer", po::value<std::string>(), "--text: tokenizer.json, llama2.c's tokenizer.bin, or a folder (default: the run's tokenizer)")(
      "held-out", po::value<double>(), "--text: only the last documents, this fraction of them (0.1: the part `train --text` held out)")(
      "batch-size", po::value<int64_t>()->default_value(8), "windows per batch")(
      "context", po::value<int64_t>()->default_value(0), "window length (0: the model's context)")(
      "device", po::value<std::string>()->default_value("cpu"), "where the model runs: cpu, cuda or cuda:N")(
      "threads", po::value<int>()->default_value(0), "CPU threads (0: all cores)");
  add_precision_option(opts, "the model");
  po::variables_map vm;
  if (!parse(args, opts, vm, "tapegrad eval --checkpoint C (--data TOKENS.bin | --text FILE | --choices FILE.jsonl)")) return 0;
  set_threads(vm["threads"].as<int>());
  const Device device = parse_device_flag(vm["device"].as<std::string>());  // refused before any work
  const nn::PrecisionGuard precision(precision_flag(vm, device));
  TG_CHECK(vm.count("data") + vm.count("text") + vm.count("choices") == 1,
           "give one of --data TOKENS.bin, --text FILE or --choices FILE.jsonl");
  TG_CHECK(!vm.count("held-out") || vm.count("text"), "--held-out goes with --text");

  const std::string path = checkpoint_flag(vm["checkpoint"].as<std::string>());
  lm::InferenceModel loaded = lm::load_inference_model(path);  // a training checkpoint or an int8 model
  move_to_device(loaded, device, path);
  const optim::Checkpoint& ck = loaded.info;
  const auto& model = loaded.model;
  if (vm.count("choices")) {  // multiple choice (lm/multiple_choice.h): the ending with the lowest mean loss per token
    const std::string file = vm["choices"].as<std::string>();
    const std::vector<lm::ChoiceExample> examples = lm::read_choice_examples(file);
    const auto codec = lm::codec_for_checkpoint(ck, path, vm.count("tokenizer") ? vm["tokenizer"].as<std::string>() : "");
    const lm::ChoiceResult r = lm::evaluate_choices(*model, *codec, examples, file);
    fmt::print("checkpoint {} (step {}) on {}:\n  accuracy {:.4f} ± {:.4f} (standard error)  {} of {} examples  chance "
               "{:.4f}\n",
               path, ck.step, file, r.accuracy, r.standard_error, r.correct, r.n, r.chance);
    return 0;
  }
  const int64_t context = vm["context"].as<int64_t>();
  TG_CHECK(context <= model->config.context_length, "--context {} is longer than the model's context length {}",
           context, model->config.context_length);

  std::unique_ptr<data::TokenFile> file;
  std::vector<uint32_t> ids;
  std::optional<data::TokenSource> source;
  std::string what;
  std::vector<uint32_t> token_bytes;  // each id's text length, for bits per byte (lm/bits_per_byte.h)
  const std::string tokenizer_flag = vm.count("tokenizer") ? vm["tokenizer"].as<std::string>() : "";
  if (vm.count("data")) {
    what = vm["data"].as<std::string>();
    file = std::make_unique<data::TokenFile>(what);
    source.emplace(*file);
    if (!tokenizer_flag.empty())
      token_bytes = lm::text_tokenizer_for_checkpoint(ck, path, tokenizer_flag)
                        .byte_lengths(size_t(model->config.vocab_size));
  } else {
    const auto given = vm["text"].as<std::vector<std::string>>();
    what = data::describe_inputs(given);
    const lm::TextTokenizer tok = lm::text_tokenizer_for_checkpoint(ck, path, tokenizer_flag);
    token_bytes = tok.byte_lengths(size_t(model->config.vocab_size));
    const std::vector<data::TextInput> inputs = data::resolve_text_inputs(given, "--text");
    lm::TextInputOptions text_options;
    text_options.text_field = vm["text-field"].as<std::string>();
    text_options.val_fraction = 0;  // every document, unless --held-out
    if (vm.count("held-out")) {
      text_options.val_fraction = vm["held-out"].as<double>();
      TG_CHECK(text_options.val_fraction > 0 && text_options.val_fraction < 1, "--held-out must be in (0, 1), but is {}",
               text_options.val_fraction);
    }
    BytesProgress tokenizing;
    text_options.progress = [&](uint64_t done, uint64_t total) { tokenizing.update(done, total); };
    lm::TokenizedText text =
        lm::tokenize_text_inputs(inputs, tok.document_separator(), tok.document_encoder(num_threads()), text_options);
    tokenizing.finish();
    if (vm.count("held-out")) {
      ids = std::move(text.val);
      what += text.val_by_tokens ? fmt::format(" (its last {} tokens: one document, held out by tokens)", ids.size())
                                 : fmt::format(" (its last {} documents)", text.val_documents);
    } else {
      ids = std::move(text.train);
    }
    source.emplace(std::span<const uint32_t>(ids));
  }
  const uint64_t max_id = lm::max_token_id_plus_one(*source);
  TG_CHECK(max_id <= uint64_t(model->config.vocab_size),
           "'{}' holds token id {}, outside the vocabulary of checkpoint '{}' ({} tokens)", what, max_id - 1, path,
           model->config.vocab_size);
  const lm::EvalResult r = lm::evaluate(*model, *source, vm["batch-size"].as<int64_t>(), context,
                                        token_bytes.empty() ? nullptr : &token_bytes);
  fmt::print("checkpoint {} (step {}) on {}:\n  loss {:.4f} nats/token  perplexity {:.3f}  tokens evaluated {} ({} "
             "windows){}\n",
             path, ck.step, what, r.loss, r.perplexity, r.tokens, r.windows,
             r.bytes ? fmt::format("  {:.4f} bits/byte ({} bytes)", r.bits_per_byte, r.bytes) : "");
  return 0;
}

}  // namespace tapegrad::cli
