// cmd_demo.cpp — `tapegrad demo` (fit an MLP on the tape, print one step's tape, gradcheck it in
// float64) and `tapegrad dot` (the DOT graph of a small expression): the learning material of the
// README's "A first look". The work itself is in demo.cpp.
#include <fmt/format.h>

#include "autograd/tapegrad.h"
#include "data/file_io.h"
#include "tools/commands.h"
#include "tools/demo.h"

namespace tapegrad::cli {

int cmd_demo(Args args) {
  po::options_description opts("tapegrad demo options");
  opts.add_options()("steps", po::value<int>()->default_value(300), "training steps (>= 0)")(
      "seed", po::value<uint64_t>()->default_value(1234), "random seed")(
      "threads", po::value<int>()->default_value(0), "CPU threads (0: OpenMP's default)")(
      "dot", po::value<std::string>()->default_value(""), "also write the DOT graph of one step's tape here");
  po::variables_map vm;
  if (!parse(args, opts, vm, "tapegrad demo [options]")) return 0;
  set_threads(vm["threads"].as<int>());
  demo::Config cfg;
  cfg.steps = vm["steps"].as<int>();
  TG_CHECK(cfg.steps >= 0, "--steps must be >= 0, but is {}", cfg.steps);
  print_blas_advice();
  cfg.seed = vm["seed"].as<uint64_t>();
  const demo::Result r =
      demo::train_mlp(cfg, [](int step, double loss) { fmt::print("step {:4d}  loss {:.6f}\n", step, loss); });
  fmt::print("{}", r.tape);
  fmt::print("final loss {:.6f} (initial {:.6f})\n{}\n", r.final_loss, r.initial_loss, r.gradcheck_message);
  if (!vm["dot"].as<std::string>().empty()) data::write_file_atomic(vm["dot"].as<std::string>(), r.dot, "demo --dot");
  return r.gradcheck_ok ? 0 : 1;
}

int cmd_dot(Args args) {
  po::options_description opts("tapegrad dot options");
  opts.add_options()("out", po::value<std::string>()->default_value("example.dot"), "output file");
  po::variables_map vm;
  if (!parse(args, opts, vm, "tapegrad dot [--out FILE]")) return 0;
  const std::string path = vm["out"].as<std::string>();
  data::write_file_atomic(path, to_dot(demo::example_expression()), "dot --out");
  fmt::print("wrote {} (render: dot -Tpng {} -o example.png)\n", path, path);
  return 0;
}

}  // namespace tapegrad::cli
