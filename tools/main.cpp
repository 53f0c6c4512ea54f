// main.cpp — the tapegrad command-line tool's entry point: picks the subcommand, turns every error
// into one stderr line and a non-zero exit. Parsing and wiring only; each subcommand is one file
// (commands.h), the work is library code (lm/, data/, nn/).
//   tapegrad tokenize train|encode | train | eval | generate | chat | import llama2c|hf | export hf|llama2c | quantize | info | demo | dot
//   | help   (`demo` without a command)
#include <boost/program_options.hpp>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "tools/commands.h"

namespace {

using tapegrad::cli::Args;

struct Command {
  const char* name;
  int (*run)(Args);
  const char* what;
};

constexpr Command kCommands[] = {
    {"tokenize", tapegrad::cli::cmd_tokenize, "train a byte-level BPE tokenizer (train) or encode text to tokens (encode)"},
    {"train", tapegrad::cli::cmd_train, "train a TransformerLM on token files or text"},
    {"eval", tapegrad::cli::cmd_eval, "loss and perplexity of a checkpoint on token data or text"},
    {"generate", tapegrad::cli::cmd_generate, "continue a prompt with a trained model (KV cache; greedy, top-k, top-p)"},
    {"chat", tapegrad::cli::cmd_chat, "talk to an instruction-tuned checkpoint (train --sft): turns from a terminal or stdin"},
    {"import", tapegrad::cli::cmd_import, "a llama2.c or Hugging Face Llama model as a tapegrad checkpoint (import llama2c | hf)"},
    {"quantize", tapegrad::cli::cmd_quantize, "a checkpoint's matmul weights as int8 groups (Q8_0) for faster generation"},
    {"export", tapegrad::cli::cmd_export, "a checkpoint as a Hugging Face Llama directory or a llama2.c .bin (export hf | llama2c)"},
    {"info", tapegrad::cli::cmd_info, "version, BLAS core and threads; with --checkpoint, what a checkpoint holds"},
    {"demo", tapegrad::cli::cmd_demo, "fit a small MLP on the tape, print its tape, gradcheck it (learning material)"},
    {"dot", tapegrad::cli::cmd_dot, "draw the tape of a small expression: Graphviz DOT (--values) or an HTML stepper (--html)"},
};

int help() {
  std::printf("usage: tapegrad <command> [options]   (tapegrad <command> --help for its options)\n\ncommands:\n");
  for (const Command& c : kCommands) std::printf("  %-9s %s\n", c.name, c.what);
  return 0;
}

int run(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {  // no command: the demo (as before the subcommands existed)
    if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) return help();
    return tapegrad::cli::cmd_demo(Args(argv + 1, argc - 1));
  }
  const std::string name = argv[1];
  if (name == "help") return help();
  for (const Command& c : kCommands)
    if (name == c.name) return c.run(Args(argv + 2, argc - 2));
  std::fprintf(stderr, "tapegrad: unknown command '%s' (try: tapegrad help)\n", name.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const boost::program_options::error& e) {
    std::fprintf(stderr, "tapegrad: %s (try: tapegrad %s --help)\n", e.what(), argc > 1 ? argv[1] : "");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tapegrad: %s\n", e.what());
  }
  return 2;
}
