// cmd_quantize.cpp — `tapegrad quantize CHECKPOINT --out DIR [--group 64] [--float-embeddings]`: a
// checkpoint's matmul weights as int8 (Q8_0 groups, kernels/int8.h) in DIR/checkpoints/step_N.safetensors
// (lm/quantized_model.h), with the run's tokenizer copied beside it, so that `generate`, `eval` and
// `info` take DIR's checkpoint as they take any other. Everything is read and checked before DIR is
// touched; an int8 model is refused (quantizing twice would only lose precision).
#include <fmt/format.h>

#include <filesystem>

#include "data/file_io.h"
#include "lm/model_io.h"
#include "lm/quantized_model.h"
#include "lm/run_dir.h"
#include "optim/checkpoint.h"
#include "tools/commands.h"

namespace tapegrad::cli {

int cmd_quantize(Args args) {
  const std::string usage = "tapegrad quantize CHECKPOINT --out DIR [--group 64] [--float-embeddings]";
  const std::vector<std::string> positional = take_positional(args, 1);
  po::options_description opts("tapegrad quantize options");
  opts.add_options()("out", po::value<std::string>()->required(), "the directory to write (checkpoints/, the tokenizer)")(
      "group", po::value<int64_t>()->default_value(64), "values per scale, along each weight's input dimension")(
      "float-embeddings", po::bool_switch(), "keep the embedding table and lm_head in float32");
  po::variables_map vm;
  if (!parse(args, opts, vm, usage + "\n  every matmul weight as int8 in groups with one float32 scale each (Q8_0)"))
    return 0;
  TG_CHECK(positional.size() == 1, "quantize: expected one CHECKPOINT (usage: {})", usage);
  const std::string out = vm["out"].as<std::string>();
  const std::string path = checkpoint_flag(positional[0]);  // a file, or a run directory
  const int64_t group = vm["group"].as<int64_t>();
  TG_CHECK(group >= 1 && group <= 4096, "--group {} is out of range [1, 4096]", group);
  TG_CHECK(!lm::is_int8_model_file(path),
           "quantize: '{}' is already an int8 model: nothing written (quantize the float checkpoint it came from)", path);

  const optim::Checkpoint ck = optim::read_checkpoint(path);
  const auto model = lm::model_from_checkpoint(ck, path);
  const lm::WeightCount before = lm::count_weights(*model);
  model->quantize_int8(group, vm["float-embeddings"].as<bool>());
  const lm::WeightCount after = lm::count_weights(*model);

  // The tokenizer files of the source run, carried over (generate looks for them beside checkpoints/).
  const std::string run = lm::run_dir_of_checkpoint(path);
  std::vector<std::pair<std::string, std::string>> tokenizer_files;  // name, bytes
  for (const char* name : {"tokenizer.json", "tokenizer.bin"}) {
    const auto src = std::filesystem::path(run.empty() ? "." : run) / name;
    if (!run.empty() && std::filesystem::exists(src))
      tokenizer_files.emplace_back(name, data::read_whole_file(src.string(), "quantize"));
  }
  optim::ConfigMap extra;
  for (const auto& [k, v] : ck.extra)
    if (k.starts_with("run.")) extra[k] = v;
  extra["run.quantized_from"] = path;

  lm::prepare_run_dir(out);
  for (const auto& [name, bytes] : tokenizer_files) {
    const std::string dst = (std::filesystem::path(out) / name).string();
    data::write_file_atomic(dst, bytes, "quantize");
    if (extra.count("run.tokenizer")) extra["run.tokenizer"] = dst;
  }
  const std::string ckpt = lm::step_checkpoint_path(out, ck.step);
  lm::save_int8_model(*model, ckpt, ck.step, extra);
  fmt::print("quantized {} (step {}): {} weights, {} of them int8 in groups of {}\n  weights {:.2f} MB → {:.2f} MB "
             "({:.1f} %)\n  int8 model {} ({:.2f} MB)\n",
             path, ck.step, after.values, after.int8_values, group, before.bytes / 1e6, after.bytes / 1e6,
             100.0 * double(after.bytes) / double(before.bytes), ckpt, std::filesystem::file_size(ckpt) / 1e6);
  if (tokenizer_files.empty()) fmt::print("  no tokenizer beside the source checkpoint: pass --tokenizer to generate\n");
  return 0;
}

}  // namespace tapegrad::cli
