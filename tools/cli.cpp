// cli.cpp — option parsing shared by the subcommands (see cli.h).
#include "tools/cli.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/backend.h"
#include "kernels/error.h"
#include "lm/edit_distance.h"
#include "lm/quantized_model.h"
#include "lm/run_dir.h"

namespace tapegrad::cli {

namespace {

// boost reads "-1" into an unsigned option as 2^64 − 1 (lexical_cast wraps): every option of an unsigned type
// whose given value is negative is refused instead, naming the flag (and the --config file it came from).
template <class T>
bool is_typed(const po::option_description& d) {
  return dynamic_cast<const po::typed_value<T>*>(d.semantic().get()) != nullptr;
}

void refuse_negative_unsigned(const po::parsed_options& parsed, const po::options_description& opts,
                              const std::string& where) {
  for (const po::option& o : parsed.options) {
    const po::option_description* d = opts.find_nothrow(o.string_key, false);
    if (!d || !(is_typed<uint64_t>(*d) || is_typed<uint32_t>(*d))) continue;
    for (const std::string& v : o.value) {
      const size_t first = v.find_first_not_of(" \t");
      if (first != std::string::npos && v[first] == '-')
        throw Error(fmt::format("{}--{} must be a non-negative integer, but is '{}'", where, o.string_key, v));
    }
  }
}

}  // namespace

std::string nearest_option(const po::options_description& opts, const std::string& given) {
  std::string name = given;
  while (name.starts_with("-")) name.erase(0, 1);
  if (const size_t eq = name.find('='); eq != std::string::npos) name.resize(eq);
  std::string best;
  size_t best_distance = 0;
  for (const auto& option : opts.options()) {
    const std::string& candidate = option->long_name();
    if (candidate.empty()) continue;
    const size_t d = lm::edit_distance(name, candidate);
    if (best.empty() || d < best_distance) best = candidate, best_distance = d;
  }
  // Close enough to be a slip: at most 2 edits, and fewer than a third of the name's letters.
  return !best.empty() && best_distance <= 2 && 3 * best_distance < name.size() ? best : std::string();
}

bool parse(Args args, po::options_description& opts, po::variables_map& vm, const std::string& usage) {
  opts.add_options()("help,h", "show this help")(
      "config", po::value<std::string>(), "read options from this INI-style file (key = value; flags override it)");
  // Boost wants argc/argv with a program name first.
  std::vector<const char*> argv{"tapegrad"};
  for (char* a : args) argv.push_back(a);
  po::parsed_options flags(&opts);
  try {
    flags = po::command_line_parser(int(argv.size()), argv.data()).options(opts).run();
  } catch (const po::unknown_option& e) {  // a typo: name the option it is probably meant to be
    const std::string near = nearest_option(opts, e.get_option_name());
    if (near.empty()) throw;
    throw po::error(fmt::format("unrecognised option '{}' (did you mean --{}?)", e.get_option_name(), near));
  }
  refuse_negative_unsigned(flags, opts, "");
  po::store(flags, vm);
  if (vm.count("help")) {
    std::cout << "usage: " << usage << "\n" << opts;
    return false;
  }
  if (vm.count("config")) {
    const std::string path = vm["config"].as<std::string>();
    std::ifstream f(path);
    TG_CHECK(f.good(), "--config: cannot read '{}'", path);
    try {
      // Values already stored (the flags) are kept: po::store never overwrites.
      const po::parsed_options file = po::parse_config_file(f, opts);
      refuse_negative_unsigned(file, opts, fmt::format("--config '{}': ", path));
      po::store(file, vm);
    } catch (const po::error& e) {
      throw Error(fmt::format("--config '{}': {}", path, e.what()));
    }
  }
  po::notify(vm);
  return true;
}

std::vector<std::string> take_positional(Args& args, size_t max) {
  std::vector<std::string> out;
  while (!args.empty() && args[0][0] != '-' && out.size() < max) {
    out.emplace_back(args[0]);
    args = args.subspan(1);
  }
  return out;
}

void print_blas_advice() {
  const std::string advice = kernels::blas_advice();
  if (!advice.empty()) std::fprintf(stderr, "tapegrad: %s\n", advice.c_str());
}

std::string checkpoint_flag(const std::string& file_or_run_dir) {
  const lm::ResolvedCheckpoint r = lm::resolve_checkpoint(file_or_run_dir);
  if (!r.note.empty()) std::fprintf(stderr, "checkpoint: %s\n", r.note.c_str());
  return r.path;
}

Device parse_device_flag(const std::string& s) {
  try {
    const Device d = parse_device(s);
    (void)kernels::backend(d);
    return d;
  } catch (const Error& e) {
    throw Error(fmt::format("--device {}: {}", s, e.what()));
  }
}

void move_to_device(lm::InferenceModel& model, Device device, const std::string& path) {
  if (device == Device::cpu()) return;
  TG_CHECK(model.int8_group == 0 && !model.model->is_int8(),
           "--device {}: '{}' is an int8 model, and int8 weights run on the CPU only (use --device cpu, or the "
           "float checkpoint it was quantized from)",
           device.str(), path);
  model.model->to(device);
}

void add_sampling_options(po::options_description& opts) {
  opts.add_options()("temperature", po::value<double>()->default_value(0.8, "0.8"), "softmax temperature (0: greedy)")(
      "top-k", po::value<int64_t>()->default_value(0), "sample from the k most likely tokens only (0: off)")(
      "top-p", po::value<double>()->default_value(0.95, "0.95"), "nucleus: the smallest set with this much mass (1: off)")(
      "greedy", po::bool_switch(), "always the most likely token (same as --temperature 0)");
}

lm::SamplerOptions sampling_options(const po::variables_map& vm) {
  lm::SamplerOptions o;
  o.temperature = vm["temperature"].as<double>();
  o.top_k = vm["top-k"].as<int64_t>();
  o.top_p = vm["top-p"].as<double>();
  o.greedy = vm["greedy"].as<bool>();
  o.validate();
  return o;
}

void add_precision_option(po::options_description& opts, const char* what) {
  opts.add_options()("precision", po::value<std::string>()->default_value("fp32"),
                     fmt::format("what {} computes in: fp32; tf32 (float32, TF32 tensor-core matmuls on a GPU; "
                                 "exactly fp32 on the CPU); bf16 (bf16 matmuls and attention, float32 weights, "
                                 "norms and loss: docs/precision.md)", what)
                         .c_str());
}

nn::Precision precision_flag(const po::variables_map& vm, Device device) {
  const nn::Precision p = nn::parse_precision(vm["precision"].as<std::string>(), "--precision");
  if (device.type == DeviceType::CUDA) kernels::set_cuda_allow_tf32(p == nn::Precision::TF32);
  return p;
}

void set_threads(int n) {
  TG_CHECK(n >= 0, "--threads must be >= 0 (0: all cores), but is {}", n);
  if (n > 0) set_num_threads(n);
}

}  // namespace tapegrad::cli
