// cmd_info.cpp — `tapegrad info`: version, the OpenBLAS library and core in use, threads; with
// --checkpoint, what a checkpoint holds (model config, parameters, step, tokenizer, hyperparameters).
#include <fmt/format.h>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/io/exact_number.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/backend.h"
#include "kernels/error.h"
#include "lm/model_io.h"
#include "lm/quantized_model.h"
#include "optim/checkpoint.h"
#include "tools/commands.h"

namespace tapegrad::cli {

namespace {

// An int8 model (lm/quantized_model.h): what it holds, without optimizer or training state.
void print_int8_model(const std::string& path) {
  const lm::InferenceModel m = lm::load_inference_model(path);
  const lm::WeightCount w = lm::count_weights(*m.model);
  fmt::print("int8 model {}\n  step {}   {}\n  weights {} ({} int8, {} float32): {:.2f} MB\n  model config:\n", path,
             m.info.step, m.info.model_dtype, w.values, w.int8_values, w.values - w.int8_values, w.bytes / 1e6);
  for (const auto& [k, v] : m.info.config)  // dtype is what the model computes in, not how its matrices are stored
    fmt::print("    {} = {}{}\n", k, v, k == "dtype" ? " (activations; the weight matrices are int8)" : "");
  fmt::print("  run:\n");
  for (const auto& [k, v] : m.info.extra)
    if (k.starts_with("run.")) fmt::print("    {} = {}\n", k.substr(4), v);
}

void print_checkpoint(const std::string& path) {
  if (lm::is_int8_model_file(path)) return print_int8_model(path);
  const optim::Checkpoint ck = optim::read_checkpoint(path);
  auto extra = [&](const std::string& key) {
    auto it = ck.extra.find(key);
    return it == ck.extra.end() ? std::string("-") : it->second;
  };
  fmt::print("checkpoint {}\n  step {}   tokens seen {}   training wall time {} s   best validation loss {}\n", path,
             ck.step, extra("tokens"), extra("wall_s"), extra("best_val_loss"));
  fmt::print("  parameters {} ({})\n  model config:\n", lm::checkpoint_parameter_count(ck), ck.model_dtype);
  for (const auto& [k, v] : ck.config) fmt::print("    {} = {}\n", k, v);
  fmt::print("  tokenizer: {} (fingerprint {})\n", extra("run.tokenizer"), extra("run.tokenizer_fingerprint"));
  // Hyperparameters as a person reads them (6 significant digits): the exact values are in config.json.
  const optim::OptimizerInfo& o = ck.optimizer;
  if (ck.optimizer_state.empty()) {
    fmt::print("  optimizer: no state saved (an imported model: `train --init-from` starts a fresh one)");
  } else {
    fmt::print("  optimizer {}:", o.kind);
    for (const auto& [k, v] : o.fixed) fmt::print(" {} {:.6g}", k, v);
    for (size_t g = 0; g < o.lr.size(); ++g)
      fmt::print("; group {} ({} tensors) lr {:.6g} weight decay {:.6g}", g, o.group_sizes[g], o.lr[g],
                 o.weight_decay[g]);
  }
  fmt::print("\n  training options:\n");
  for (const auto& [k, v] : ck.extra)
    if (k.starts_with("train.")) fmt::print("    {} = {}\n", k.substr(6), v);
  fmt::print("  run:\n");
  for (const auto& [k, v] : ck.extra)
    if (k.starts_with("run.")) fmt::print("    {} = {}\n", k.substr(4), v);
}

}  // namespace

int cmd_info(Args args) {
  po::options_description opts("tapegrad info options");
  opts.add_options()("checkpoint", po::value<std::string>(), "describe this checkpoint (a file or a run directory) instead")(
      "threads", po::value<int>()->default_value(0), "CPU threads (0: OpenMP's default)");
  po::variables_map vm;
  if (!parse(args, opts, vm, "tapegrad info [--checkpoint C]")) return 0;
  set_threads(vm["threads"].as<int>());
  if (vm.count("checkpoint")) {
    print_checkpoint(checkpoint_flag(vm["checkpoint"].as<std::string>()));
    return 0;
  }
  fmt::print("tapegrad 0.1.0\nOpenBLAS: {}\nOpenBLAS core: {} (threading model {}: 2 = OpenMP)\nthreads: {}\n",
             kernels::blas_library_path(), kernels::blas_core_name(), kernels::blas_parallel_model(), num_threads());
  print_blas_advice();
  return 0;
}

}  // namespace tapegrad::cli
