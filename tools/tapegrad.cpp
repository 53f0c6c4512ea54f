// tapegrad.cpp — the command-line tool: parsing and wiring only.
//   tapegrad demo  [--steps N] [--seed S] [--threads T] [--dot FILE]   (the default)
//   tapegrad dot   [--out FILE]     the DOT graph of a small example expression
//   tapegrad info                   version, BLAS core, threads
// Training and generation of language models arrive with the nn/optim/data issues.
#include <boost/program_options.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "autograd/tapegrad.h"
#include "kernels/backend.h"
#include "tools/demo.h"

namespace po = boost::program_options;
using namespace tapegrad;

namespace {

bool write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!(f << text) || !f.flush()) {
      std::fprintf(stderr, "tapegrad: cannot write %s\n", tmp.c_str());
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr, "tapegrad: cannot rename %s to %s\n", tmp.c_str(), path.c_str());
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

void print_blas_advice() {
  const std::string advice = kernels::blas_advice();
  if (!advice.empty()) std::fprintf(stderr, "tapegrad: %s\n", advice.c_str());
}

int run(int argc, char** argv) {
  const std::string cmd = argc > 1 && argv[1][0] != '-' ? argv[1] : "demo";
  const int skip = argc > 1 && argv[1][0] != '-' ? 2 : 1;
  po::options_description opts("options");
  opts.add_options()("help,h", "show this help")(
      "steps", po::value<int>()->default_value(300), "demo: training steps")(
      "seed", po::value<uint64_t>()->default_value(1234), "demo: random seed")(
      "threads", po::value<int>()->default_value(0), "CPU threads (0: OpenMP's default)")(
      "dot", po::value<std::string>()->default_value(""), "demo: also write the DOT graph of one step's tape here")(
      "out", po::value<std::string>()->default_value("example.dot"), "dot: output file");
  po::variables_map vm;
  po::store(po::command_line_parser(argc - skip + 1, argv + skip - 1).options(opts).run(), vm);
  po::notify(vm);
  if (vm.count("help") || cmd == "help") {
    std::cout << "usage: tapegrad [demo|dot|info] [options]\n" << opts;
    return 0;
  }
  if (vm["threads"].as<int>() > 0) set_num_threads(vm["threads"].as<int>());

  if (cmd == "info") {
    fmt::print("tapegrad 0.1.0\nOpenBLAS: {}\nOpenBLAS core: {} (threading model {}: 2 = OpenMP)\nthreads: {}\n",
               kernels::blas_library_path(), kernels::blas_core_name(), kernels::blas_parallel_model(),
               num_threads());
    print_blas_advice();
    return 0;
  }
  if (cmd == "dot") {
    const std::string path = vm["out"].as<std::string>();
    if (!write_file(path, to_dot(demo::example_expression()))) return 1;
    fmt::print("wrote {} (render: dot -Tpng {} -o example.png)\n", path, path);
    return 0;
  }
  if (cmd == "demo") {
    print_blas_advice();
    demo::Config cfg;
    cfg.steps = vm["steps"].as<int>();
    cfg.seed = vm["seed"].as<uint64_t>();
    const demo::Result r = demo::train_mlp(cfg, [](int step, double loss) { fmt::print("step {:4d}  loss {:.6f}\n", step, loss); });
    fmt::print("{}", r.tape);
    fmt::print("final loss {:.6f} (initial {:.6f})\n{}\n", r.final_loss,
               r.initial_loss, r.gradcheck_message);
    if (!vm["dot"].as<std::string>().empty() && !write_file(vm["dot"].as<std::string>(), r.dot)) return 1;
    return r.gradcheck_ok ? 0 : 1;
  }
  std::fprintf(stderr, "tapegrad: unknown command '%s' (try: tapegrad help)\n", cmd.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const po::error& e) {
    std::fprintf(stderr, "tapegrad: %s (try: tapegrad help)\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tapegrad: %s\n", e.what());
  }
  return 2;
}
