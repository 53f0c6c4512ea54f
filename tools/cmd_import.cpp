// cmd_import.cpp — `tapegrad import llama2c MODEL.bin TOKENIZER.bin --out DIR`: a llama2.c model
// (lm/llama2c.h) as a tapegrad checkpoint DIR/checkpoints/step_00000000.safetensors (the weights loaded
// strictly into a TransformerLM of the file's config; a fresh AdamW record; step 0) with its tokenizer
// copied to DIR/tokenizer.bin, so that `tapegrad generate --checkpoint …` and `eval` work unchanged
// (lm::codec_for_checkpoint picks the llama2c codec from the checkpoint's "run.tokenizer_kind").
#include <fmt/format.h>

#include <filesystem>

#include "data/file_io.h"
#include "kernels/error.h"
#include "lm/llama2c.h"
#include "lm/llama2c_tokenizer.h"
#include "lm/run_dir.h"
#include "nn/transformer_lm.h"
#include "optim/adamw.h"
#include "optim/checkpoint.h"
#include "tools/commands.h"

namespace tapegrad::cli {

namespace {

int import_llama2c(Args args) {
  const std::string usage = "tapegrad import llama2c MODEL.bin TOKENIZER.bin --out DIR";
  std::vector<std::string> positional;
  while (!args.empty() && args[0][0] != '-' && positional.size() < 2) {
    positional.emplace_back(args[0]);
    args = args.subspan(1);
  }
  po::options_description opts("tapegrad import llama2c options");
  opts.add_options()("out", po::value<std::string>()->required(), "the directory to write (checkpoints/, tokenizer.bin)");
  po::variables_map vm;
  if (!parse(args, opts, vm, usage + "\n  MODEL.bin: llama2.c legacy (version 0) model; TOKENIZER.bin: its tokenizer"))
    return 0;
  TG_CHECK(positional.size() == 2, "import llama2c: expected MODEL.bin and TOKENIZER.bin (usage: {})", usage);
  const std::string& model_path = positional[0];
  const std::string& tokenizer_path = positional[1];
  const std::string out = vm["out"].as<std::string>();

  lm::Llama2cModel m = lm::read_llama2c_model(model_path);
  // Read and validate the tokenizer against the model's vocabulary before writing anything.
  const lm::Llama2cTokenizer tok(tokenizer_path, size_t(m.config.vocab_size));
  const std::string tokenizer_bytes = data::read_whole_file(tokenizer_path, "import llama2c");

  nn::TransformerLM model(m.config);
  model.load_state_dict(m.weights);  // strict: every parameter present, shapes equal
  optim::AdamW optimizer(model.parameters());
  Generator gen;

  lm::prepare_run_dir(out);
  const std::string tokenizer_out = (std::filesystem::path(out) / "tokenizer.bin").string();
  data::write_file_atomic(tokenizer_out, tokenizer_bytes, "import llama2c");
  const std::string ckpt = lm::step_checkpoint_path(out, 0);
  optim::save_checkpoint(ckpt, model.state_dict(), optimizer, 0, gen, model.config.to_config_map(),
                         {{"run.tokenizer_kind", "llama2c"}, {"run.tokenizer", tokenizer_out}, {"run.source", model_path}});
  fmt::print("imported {} ({} parameters: d_model {}, {} layers, {} heads / {} kv heads, d_ff {}, vocab {}, "
             "context {}, {} classifier)\n  checkpoint {}\n  tokenizer  {} ({} tokens)\n",
             model_path, model.num_parameters(), m.config.d_model, m.config.n_layers, m.config.n_heads,
             m.config.n_kv_heads, m.config.d_ff, m.config.vocab_size, m.config.context_length,
             m.config.tie_embeddings ? "shared" : "separate", ckpt, tokenizer_out, tok.vocab_size());
  return 0;
}

}  // namespace

int cmd_import(Args args) {
  TG_CHECK(!args.empty(), "import: expected a format: llama2c (usage: tapegrad import llama2c MODEL.bin TOKENIZER.bin --out DIR)");
  const std::string format = args[0];
  if (format == "--help" || format == "-h" || format == "help") {
    fmt::print("usage: tapegrad import llama2c MODEL.bin TOKENIZER.bin --out DIR\n"
               "  a llama2.c model (legacy version-0 .bin) and its tokenizer as a tapegrad checkpoint\n");
    return 0;
  }
  if (format == "llama2c") return import_llama2c(args.subspan(1));
  throw Error(fmt::format("import: unknown format '{}' (expected llama2c)", format));
}

}  // namespace tapegrad::cli
