// cli.h — what every subcommand of the tool shares: option parsing (flags, then an INI-style
// --config FILE whose values the flags override), help text, and small I/O helpers.
//
//   po::options_description opts("tapegrad eval options");
//   opts.add_options()("checkpoint", po::value<std::string>()->required(), "checkpoint file");
//   po::variables_map vm;
//   if (!cli::parse(args, opts, vm, "tapegrad eval --checkpoint C --data TOKENS.bin")) return 0;  // --help shown
//
// Errors (unknown or malformed flags, a missing required flag, an unreadable --config) are thrown
// as boost::program_options::error or tapegrad::Error; main.cpp prints them as one stderr line.
#pragma once
#include <boost/program_options.hpp>
#include <span>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "lm/sampler.h"
#include "nn/precision.h"

namespace tapegrad::lm {
struct InferenceModel;
}

namespace tapegrad::cli {

namespace po = boost::program_options;

// The arguments after the subcommand's name (argv[0] is not included).
using Args = std::span<char* const>;

// Adds --help and --config to `opts`, parses `args` (then the config file, if given: flags win),
// runs notify (required options, value checks). Returns false when --help was asked for (after
// printing `usage` and the options to stdout): the command then returns 0.
bool parse(Args args, po::options_description& opts, po::variables_map& vm, const std::string& usage);

// The long name of the option in `opts` nearest to `given` ("--tokenzier" → "tokenizer"), when it is close enough
// to be a typo (at most 2 edits, fewer than a third of its letters); "" otherwise. parse() names it in the error.
std::string nearest_option(const po::options_description& opts, const std::string& given);

// Takes up to `max` leading positional arguments (those not starting with '-') off the front of `args`,
// for commands such as `import llama2c MODEL.bin TOKENIZER.bin --out DIR`.
std::vector<std::string> take_positional(Args& args, size_t max);

// One stderr line when OpenBLAS runs a generic core on this CPU (see scripts/blas_env.sh).
void print_blas_advice();

// A --checkpoint value (a file, or a run directory: lm::resolve_checkpoint) as the checkpoint file to read;
// for a directory, one stderr line says which checkpoint was taken.
std::string checkpoint_flag(const std::string& file_or_run_dir);

// A --device value: "cpu", "cuda", "cuda:N"; refused at once (naming the flag) when this build or
// machine has no such device.
Device parse_device_flag(const std::string& s);

// Moves a loaded model to `device` (eval, generate, chat). An int8 model runs on the CPU only: any
// other device is refused, naming the checkpoint and what to do instead.
void move_to_device(lm::InferenceModel& model, Device device, const std::string& path);

// The sampling flags of `generate` and `chat`: --temperature (0.8), --top-k (0), --top-p (0.95), --greedy; and
// what they say, validated (bad values are refused before a model is read).
void add_sampling_options(po::options_description& opts);
lm::SamplerOptions sampling_options(const po::variables_map& vm);

// --precision fp32|tf32|bf16 (nn/precision.h), default fp32; `what` says what it applies to.
void add_precision_option(po::options_description& opts, const char* what);
// The --precision value; a bad one is refused naming the flag. On a CUDA device it also turns TF32 matmuls
// on (tf32) or off (the others).
nn::Precision precision_flag(const po::variables_map& vm, Device device);

// Sets the CPU thread count when n > 0 (0 keeps OpenMP's default); throws on n < 0.
void set_threads(int n);

}  // namespace tapegrad::cli
