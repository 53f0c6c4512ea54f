// cmd_export.cpp — `tapegrad export hf CHECKPOINT --out DIR`: a checkpoint's TransformerLM as a Hugging Face
// Llama directory (lm/hf_llama.h: DIR/config.json, DIR/model.safetensors) that transformers'
// LlamaForCausalLM.from_pretrained(DIR) loads; plus DIR/tokenizer.json when the run has a byte-level BPE
// tokenizer (its tokenizer.json, checked against the checkpoint's fingerprint, or --tokenizer).
// `tapegrad export llama2c CHECKPOINT --out FILE.bin [--version 0|1|2] [--group G]`: a checkpoint or an
// int8 model as a llama2.c model file (lm/llama2c_export.h) for run.c (version 0) or runq.c (version 2).
#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "data/hf_tokenizer_json.h"
#include "kernels/error.h"
#include "lm/hf_llama.h"
#include "lm/llama2c_export.h"
#include "lm/model_io.h"
#include "lm/quantized_model.h"
#include "lm/run_dir.h"
#include "optim/checkpoint.h"
#include "tools/commands.h"

namespace tapegrad::cli {

namespace {

int export_hf(Args args) {
  const std::string usage = "tapegrad export hf CHECKPOINT --out DIR";
  const std::vector<std::string> positional = take_positional(args, 1);
  const std::string given = positional.empty() ? "" : positional[0];
  po::options_description opts("tapegrad export hf options");
  opts.add_options()("out", po::value<std::string>()->required(), "the directory to write (config.json, model.safetensors, tokenizer.json)")(
      "tokenizer", po::value<std::string>(), "tokenizer.json or folder to export (default: the run's tokenizer.json, if any)")(
      "dtype", po::value<std::string>(), "the weights' dtype in the files: the model's (default), or bfloat16 (half the bytes)");
  po::variables_map vm;
  if (!parse(args, opts, vm, usage + "\n  CHECKPOINT: a tapegrad checkpoint (.safetensors) of a TransformerLM, or a run directory")) return 0;
  TG_CHECK(!given.empty(), "export hf: expected CHECKPOINT (usage: {})", usage);
  const std::string out = vm["out"].as<std::string>();
  const std::string checkpoint = checkpoint_flag(given);  // a file, or a run directory

  const optim::Checkpoint ck = optim::read_checkpoint(checkpoint);
  const auto model = lm::model_from_checkpoint(ck, checkpoint);
  // The tokenizer, read and checked before anything is written.
  std::optional<data::BpeModel> tok;
  const auto kind = ck.extra.find("run.tokenizer_kind");
  const bool bpe = kind == ck.extra.end() || kind->second == "bpe";
  const std::string override_path = vm.count("tokenizer") ? vm["tokenizer"].as<std::string>() : "";
  const std::string run = lm::run_dir_of_checkpoint(checkpoint);
  if (bpe && (!override_path.empty() || (!run.empty() && std::filesystem::exists(std::filesystem::path(run) / "tokenizer.json"))))
    tok = lm::tokenizer_for_checkpoint(ck, checkpoint, override_path);

  std::optional<DType> weights;
  if (vm.count("dtype")) {
    const std::string d = vm["dtype"].as<std::string>();
    TG_CHECK(d == "bfloat16" || d == "bf16" || d == dtype_name(model->config.dtype),
             "--dtype: '{}' is not a dtype export hf writes (bfloat16, or the model's {})", d, model->config.dtype);
    weights = d == "bfloat16" || d == "bf16" ? kBFloat16 : model->config.dtype;
  }
  lm::export_hf_llama(*model, out, weights);
  std::string tok_line = "  no tokenizer.json (the checkpoint's run has no byte-level BPE tokenizer.json)";
  if (tok) {
    const std::string path = (std::filesystem::path(out) / "tokenizer.json").string();
    data::save_hf_tokenizer_json(*tok, path);
    tok_line = fmt::format("  tokenizer {} ({} tokens)", path, tok->vocab.size());
  }
  fmt::print("exported {} (step {}, {} parameters) as a Hugging Face Llama model:\n  {}/config.json\n  {}/model.safetensors\n{}\n",
             checkpoint, ck.step, model->num_parameters(), out, out, tok_line);
  return 0;
}

int export_llama2c(Args args) {
  const std::string usage = "tapegrad export llama2c CHECKPOINT --out FILE.bin [--version 0|1|2] [--group G]";
  const std::vector<std::string> positional = take_positional(args, 1);
  const std::string given = positional.empty() ? "" : positional[0];
  po::options_description opts("tapegrad export llama2c options");
  opts.add_options()("out", po::value<std::string>()->required(), "the llama2.c model file to write")(
      "version", po::value<int>()->default_value(0),
      "0: float32 legacy (run.c), 1: float32 \"ak42\", 2: int8 Q8_0 (runq.c)")(
      "group", po::value<int64_t>(),
      "version 2: values per scale; must divide dim and hidden_dim (default: an int8 model's own, else 64 or the "
      "largest power of two below 64 dividing both)");
  po::variables_map vm;
  if (!parse(args, opts, vm, usage + "\n  CHECKPOINT: a tapegrad checkpoint or int8 model (.safetensors) of a TransformerLM, or a run directory"))
    return 0;
  TG_CHECK(!given.empty(), "export llama2c: expected CHECKPOINT (usage: {})", usage);
  const std::string out = vm["out"].as<std::string>();
  const std::string checkpoint = checkpoint_flag(given);  // a file, or a run directory
  lm::Llama2cExportOptions options;
  options.version = vm["version"].as<int>();
  TG_CHECK(options.version >= 0 && options.version <= 2, "export llama2c: --version {}: must be 0, 1 or 2",
           options.version);
  if (vm.count("group")) {
    options.group = vm["group"].as<int64_t>();
    TG_CHECK(options.group >= 1 && options.group <= 4096, "export llama2c: --group {} is out of range [1, 4096]",
             options.group);
    TG_CHECK(options.version == 2, "export llama2c: --group is for --version 2 (int8); versions 0 and 1 are float32");
  }

  const lm::InferenceModel m = lm::load_inference_model(checkpoint);  // float checkpoint or int8 model
  const lm::Llama2cExport e = lm::export_llama2c(*m.model, out, options);
  std::string how;
  if (e.version == 2) {
    how = fmt::format("int8 Q8_0 in groups of {} ({})", e.group, e.group_reason);
    if (e.int8_kept > 0)
      how += fmt::format("; {} int8 matrices written unchanged, {} quantized here", e.int8_kept, e.int8_quantized);
  } else {
    how = e.dequantized ? fmt::format("float32, dequantized from the int8 model's groups of {}", m.int8_group)
                        : std::string("float32");
  }
  fmt::print("exported {} (step {}) as a llama2.c model, version {}: {}\n  {} ({} bytes)\n", checkpoint, m.info.step,
             e.version, how, out, e.bytes);
  return 0;
}

}  // namespace

int cmd_export(Args args) {
  const std::string usage =
      "usage: tapegrad export hf CHECKPOINT --out DIR\n"
      "  a checkpoint as a Hugging Face Llama directory (config.json, model.safetensors, tokenizer.json)\n"
      "usage: tapegrad export llama2c CHECKPOINT --out FILE.bin [--version 0|1|2] [--group G]\n"
      "  a checkpoint or int8 model as a llama2.c model file: version 0 (float32, run.c), 1 (float32, \"ak42\")\n"
      "  or 2 (int8 Q8_0, runq.c)";
  TG_CHECK(!args.empty(), "export: expected a format: hf or llama2c (usage: tapegrad export hf CHECKPOINT --out DIR | "
                          "tapegrad export llama2c CHECKPOINT --out FILE.bin [--version 0|1|2] [--group G])");
  const std::string format = args[0];
  if (format == "--help" || format == "-h" || format == "help") {
    fmt::print("{}\n", usage);
    return 0;
  }
  if (format == "hf") return export_hf(args.subspan(1));
  if (format == "llama2c") return export_llama2c(args.subspan(1));
  throw Error(fmt::format("export: unknown format '{}' (expected hf or llama2c)", format));
}

}  // namespace tapegrad::cli
