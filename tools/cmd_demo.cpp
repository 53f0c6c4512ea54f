// cmd_demo.cpp — `tapegrad demo`: fit an MLP on the tape, print one step's tape, gradcheck it in
// float64 (learning material; `tapegrad dot` is cmd_dot.cpp). The work itself is in demo.cpp.
#include <fmt/format.h>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "data/file_io.h"
#include "kernels/error.h"
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

}  // namespace tapegrad::cli
