// cmd_export.cpp — `tapegrad export hf CHECKPOINT --out DIR`: a checkpoint's TransformerLM as a Hugging Face
// Llama directory (lm/hf_llama.h: DIR/config.json, DIR/model.safetensors) that transformers'
// LlamaForCausalLM.from_pretrained(DIR) loads; plus DIR/tokenizer.json when the run has a byte-level BPE
// tokenizer (its tokenizer.json, checked against the checkpoint's fingerprint, or --tokenizer).
#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "data/hf_tokenizer_json.h"
#include "kernels/error.h"
#include "lm/hf_llama.h"
#include "lm/model_io.h"
#include "lm/run_dir.h"
#include "optim/checkpoint.h"
#include "tools/commands.h"

namespace tapegrad::cli {

namespace {

int export_hf(Args args) {
  const std::string usage = "tapegrad export hf CHECKPOINT --out DIR";
  const std::vector<std::string> positional = take_positional(args, 1);
  const std::string checkpoint = positional.empty() ? "" : positional[0];
  po::options_description opts("tapegrad export hf options");
  opts.add_options()("out", po::value<std::string>()->required(), "the directory to write (config.json, model.safetensors, tokenizer.json)")(
      "tokenizer", po::value<std::string>(), "tokenizer.json or folder to export (default: the run's tokenizer.json, if any)");
  po::variables_map vm;
  if (!parse(args, opts, vm, usage + "\n  CHECKPOINT: a tapegrad checkpoint (.safetensors) of a TransformerLM")) return 0;
  TG_CHECK(!checkpoint.empty(), "export hf: expected CHECKPOINT (usage: {})", usage);
  const std::string out = vm["out"].as<std::string>();

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

  lm::export_hf_llama(*model, out);
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

}  // namespace

int cmd_export(Args args) {
  const std::string usage = "usage: tapegrad export hf CHECKPOINT --out DIR";
  TG_CHECK(!args.empty(), "export: expected a format: hf ({})", usage);
  const std::string format = args[0];
  if (format == "--help" || format == "-h" || format == "help") {
    fmt::print("{}\n  a checkpoint as a Hugging Face Llama directory (config.json, model.safetensors, tokenizer.json)\n", usage);
    return 0;
  }
  if (format == "hf") return export_hf(args.subspan(1));
  throw Error(fmt::format("export: unknown format '{}' (expected hf)", format));
}

}  // namespace tapegrad::cli
