// cmd_import.cpp — `tapegrad import llama2c MODEL.bin TOKENIZER.bin --out DIR`: a llama2.c model
// (lm/llama2c.h: export.py's .bin, version 0 or 1 float32, version 2 int8 Q8_0) as a tapegrad checkpoint
// DIR/checkpoints/step_00000000.safetensors (float32: the weights loaded strictly into a TransformerLM of
// the file's config, a fresh AdamW record, step 0; version 2: an int8 model file, lm/quantized_model.h,
// with the file's int8 values and scales unchanged) with its tokenizer
// copied to DIR/tokenizer.bin, so that `tapegrad generate --checkpoint …` and `eval` work unchanged
// (lm::codec_for_checkpoint picks the llama2c codec from the checkpoint's "run.tokenizer_kind").
// `tapegrad import hf DIR --out OUT`: a Hugging Face Llama directory (lm/hf_llama.h: one
// model.safetensors or a sharded index) the same way; its
// tokenizer.json, when there is one, is copied to OUT/tokenizer.json and its fingerprint recorded.
#include <fmt/format.h>

#include <filesystem>

#include "data/file_io.h"
#include "data/hf_tokenizer_json.h"
#include "data/tokenizer_files.h"
#include "lm/hf_llama.h"
#include "kernels/error.h"
#include "lm/llama2c.h"
#include "lm/llama2c_tokenizer.h"
#include "lm/model_io.h"
#include "lm/quantized_model.h"
#include "lm/run_dir.h"
#include "nn/transformer_lm.h"
#include "tools/commands.h"

namespace tapegrad::cli {

namespace {

// "… parameters: d_model 64, 5 layers, 8 heads / 4 kv heads, d_ff 172, vocab 512, context 512, shared classifier, float32"
// (an int8 model: "… weights: …, int8 Q8_0 in groups of 4")
std::string describe(const nn::TransformerLM& model, int64_t int8_group = 0) {
  const nn::TransformerLMConfig& c = model.config;
  const bool int8 = int8_group > 0;
  return fmt::format("{} {}: d_model {}, {} layers, {} heads / {} kv heads, d_ff {}, vocab {}, context {}, {} "
                     "classifier, {}",
                     int8 ? lm::count_weights(model).values : model.num_parameters(), int8 ? "weights" : "parameters",
                     c.d_model, c.n_layers, c.n_heads, c.n_kv_heads, c.d_ff, c.vocab_size, c.context_length,
                     c.tie_embeddings ? "shared" : "separate",
                     int8 ? fmt::format("int8 Q8_0 in groups of {}", int8_group) : std::string(dtype_name(c.dtype)));
}

int import_llama2c(Args args) {
  const std::string usage = "tapegrad import llama2c MODEL.bin TOKENIZER.bin --out DIR";
  const std::vector<std::string> positional = take_positional(args, 2);
  po::options_description opts("tapegrad import llama2c options");
  opts.add_options()("out", po::value<std::string>()->required(), "the directory to write (checkpoints/, tokenizer.bin)");
  po::variables_map vm;
  if (!parse(args, opts, vm, usage + "\n  MODEL.bin: llama2.c model (export.py --version 0 or 1: float32; --version 2: int8 "
                                 "Q8_0); TOKENIZER.bin: its tokenizer"))
    return 0;
  TG_CHECK(positional.size() == 2, "import llama2c: expected MODEL.bin and TOKENIZER.bin (usage: {})", usage);
  const std::string& model_path = positional[0];
  const std::string& tokenizer_path = positional[1];
  const std::string out = vm["out"].as<std::string>();

  lm::Llama2cModel m;
  try {
    m = lm::read_llama2c_model(model_path);
  } catch (const Error& e) {
    // The two files swapped is an easy slip: say so when the "model" reads as a tokenizer file.
    bool is_tokenizer = false;
    try {
      is_tokenizer = lm::Llama2cTokenizer::count_tokens(model_path) >= 259;
    } catch (const Error&) {
    }
    if (!is_tokenizer) throw;
    throw Error(fmt::format("{} ({} is a llama2.c tokenizer file: the model comes first — {})", e.what(), model_path,
                            usage));
  }
  // Read and validate the tokenizer against the model's vocabulary before writing anything.
  const lm::Llama2cTokenizer tok(tokenizer_path, size_t(m.config.vocab_size));
  const std::string tokenizer_bytes = data::read_whole_file(tokenizer_path, "import llama2c");

  const int version = m.version;
  const int64_t group = m.group_size;
  // Float (v0, v1): every parameter loaded strictly; int8 (v2): the int8 matrices installed, the norms loaded strictly.
  const std::unique_ptr<nn::TransformerLM> model = lm::make_llama2c_model(std::move(m));
  lm::prepare_run_dir(out);
  const std::string tokenizer_out = (std::filesystem::path(out) / "tokenizer.bin").string();
  data::write_file_atomic(tokenizer_out, tokenizer_bytes, "import llama2c");
  const std::string ckpt = lm::step_checkpoint_path(out, 0);
  const optim::ConfigMap extra{
      {"run.tokenizer_kind", "llama2c"}, {"run.tokenizer", tokenizer_out}, {"run.source", model_path}};
  if (version == 2)
    lm::save_int8_model(*model, ckpt, 0, extra);
  else
    lm::save_model_checkpoint(*model, ckpt, extra);
  fmt::print("imported {} (llama2.c version {}; {})\n  {} {}\n  tokenizer  {} ({} tokens)\n", model_path, version,
             describe(*model, group), version == 2 ? "int8 model" : "checkpoint", ckpt, tokenizer_out, tok.vocab_size());
  return 0;
}

int import_hf(Args args) {
  const std::string usage = "tapegrad import hf DIR --out OUT";
  const std::vector<std::string> positional = take_positional(args, 1);
  const std::string dir = positional.empty() ? "" : positional[0];
  po::options_description opts("tapegrad import hf options");
  opts.add_options()("out", po::value<std::string>()->required(), "the directory to write (checkpoints/, tokenizer.json)");
  po::variables_map vm;
  if (!parse(args, opts, vm, usage + "\n  DIR: config.json + model.safetensors (or model.safetensors.index.json + shards) of a "
                                 "LlamaForCausalLM [+ tokenizer.json]"))
    return 0;
  TG_CHECK(!dir.empty(), "import hf: expected DIR (usage: {})", usage);
  const std::string out = vm["out"].as<std::string>();

  lm::HfLlama m = lm::import_hf_llama(dir);
  nn::TransformerLM model(m.config);
  model.load_state_dict(m.weights);  // strict
  // The tokenizer, read and checked against the vocabulary before anything is written.
  const std::string tokenizer_in = (std::filesystem::path(dir) / "tokenizer.json").string();
  std::string tokenizer_bytes, fingerprint;
  size_t tokenizer_size = 0;
  if (std::filesystem::exists(tokenizer_in)) {
    const data::BpeModel tok = data::load_hf_tokenizer_json(tokenizer_in);
    TG_CHECK(tok.vocab.size() <= size_t(m.config.vocab_size), "import hf: '{}' has {} tokens, more than vocab_size {}",
             tokenizer_in, tok.vocab.size(), m.config.vocab_size);
    tokenizer_bytes = data::read_whole_file(tokenizer_in, "import hf");
    fingerprint = data::tokenizer_fingerprint(tok);
    tokenizer_size = tok.vocab.size();
  }
  lm::prepare_run_dir(out);
  std::map<std::string, std::string> extra{{"run.source", dir}};
  std::string tok_line = "no tokenizer.json in " + dir;
  if (!fingerprint.empty()) {
    const std::string tokenizer_out = (std::filesystem::path(out) / "tokenizer.json").string();
    data::write_file_atomic(tokenizer_out, tokenizer_bytes, "import hf");
    extra["run.tokenizer"] = tokenizer_out;
    extra["run.tokenizer_fingerprint"] = fingerprint;
    tok_line = fmt::format("{} ({} tokens)", tokenizer_out, tokenizer_size);
  }
  const std::string ckpt = lm::step_checkpoint_path(out, 0);
  lm::save_model_checkpoint(model, ckpt, extra);
  fmt::print("imported {} ({})\n  weights    {}\n  checkpoint {}\n  tokenizer  {}\n", dir, describe(model),
             m.weights_source, ckpt, tok_line);
  return 0;
}

}  // namespace

int cmd_import(Args args) {
  TG_CHECK(!args.empty(), "import: expected a format: llama2c or hf (usage: tapegrad import llama2c MODEL.bin TOKENIZER.bin --out DIR | "
                          "tapegrad import hf DIR --out OUT)");
  const std::string format = args[0];
  if (format == "--help" || format == "-h" || format == "help") {
    fmt::print("usage: tapegrad import llama2c MODEL.bin TOKENIZER.bin --out DIR\n"
               "  a llama2.c model (.bin: legacy version 0, \"ak42\" version 1 float32 or version 2 int8 Q8_0) and its\n"
               "  tokenizer as a tapegrad checkpoint (an int8 model for version 2)\n"
               "usage: tapegrad import hf DIR --out OUT\n"
               "  a Hugging Face Llama directory (config.json, model.safetensors or sharded model.safetensors.index.json\n"
               "  [, tokenizer.json]) as a tapegrad checkpoint\n");
    return 0;
  }
  if (format == "llama2c") return import_llama2c(args.subspan(1));
  if (format == "hf") return import_hf(args.subspan(1));
  throw Error(fmt::format("import: unknown format '{}' (expected llama2c or hf)", format));
}

}  // namespace tapegrad::cli
