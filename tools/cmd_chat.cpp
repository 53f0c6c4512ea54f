// cmd_chat.cpp — `tapegrad chat`: a conversation with an instruction-tuned checkpoint (lm::ChatSession:
// the chat template, the KV cache kept across turns, old turns dropped when the context is full), each
// answer streamed to stdout as it is decoded.
//   tapegrad chat --checkpoint sft_run --system "You answer briefly."        (a terminal: "> " prompts)
//   printf 'reverse: abc\n/reset\nreverse: xyz\n' | tapegrad chat --checkpoint sft_run --greedy
// One user turn per line; "/reset" forgets the conversation (the system message stays), "/quit" or the
// end of stdin ends it. The prompt "> " is shown only when stdin is a terminal; piped, each answer is one
// line of stdout (a message that cannot fit the context is then an error; on a terminal, a message).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "lm/chat_session.h"
#include "lm/chat_template.h"
#include "lm/quantized_model.h"
#include "lm/text_codec.h"
#include "lm/trainer.h"  // parse_cuda_graph_flag
#include "optim/checkpoint.h"
#include "tools/commands.h"

namespace tapegrad::cli {

namespace {

void print_now(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

const char* stop_reason(lm::ChatStop stop) {
  switch (stop) {
    case lm::ChatStop::EndToken: return "";
    case lm::ChatStop::StopString: return "";
    case lm::ChatStop::MaxTokens: return "the answer reached --max-tokens";
    case lm::ChatStop::ContextFull: return "the answer filled the model's context";
  }
  return "";
}

}  // namespace

int cmd_chat(Args args) {
  po::options_description opts("tapegrad chat options");
  opts.add_options()("checkpoint", po::value<std::string>()->required(),
                     "an instruction-tuned checkpoint (train --sft), or its run directory")(
      "tokenizer", po::value<std::string>(), "tokenizer.json or folder (default: the run's tokenizer)")(
      "system", po::value<std::string>(), "the system message, kept when old turns are dropped and on /reset")(
      "max-tokens", po::value<int64_t>()->default_value(256), "tokens per answer at most")(
      "seed", po::value<uint64_t>()->default_value(1), "sampling seed (the same seed gives the same conversation)")(
      "stop", po::value<std::vector<std::string>>()->composing(),
      "end an answer before this text (may be given several times; besides the end-of-turn token)")(
      "device", po::value<std::string>()->default_value("cpu"), "where the model runs: cpu, cuda or cuda:N")(
      "cuda-graph", po::value<std::string>()->default_value("on"),
      "on|off: on a GPU, replay each decode step as one captured CUDA graph (the same conversation)")(
      "threads", po::value<int>()->default_value(0), "CPU threads (0: all cores)");
  add_sampling_options(opts);
  add_precision_option(opts, "the model");
  po::variables_map vm;
  if (!parse(args, opts, vm, "tapegrad chat --checkpoint C [--system TEXT] [options]   (then one message per line)"))
    return 0;
  set_threads(vm["threads"].as<int>());
  const Device device = parse_device_flag(vm["device"].as<std::string>());
  const nn::PrecisionGuard precision(precision_flag(vm, device));

  lm::ChatOptions o;
  o.sampling = sampling_options(vm);  // bad options are refused before the model is read
  o.seed = vm["seed"].as<uint64_t>();
  o.max_tokens = vm["max-tokens"].as<int64_t>();
  TG_CHECK(o.max_tokens >= 1, "--max-tokens must be at least 1, but is {}", o.max_tokens);
  if (vm.count("stop")) o.stop = vm["stop"].as<std::vector<std::string>>();
  if (vm.count("system")) o.system = vm["system"].as<std::string>();
  o.cuda_graph = lm::parse_cuda_graph_flag(vm["cuda-graph"].as<std::string>());

  const std::string path = checkpoint_flag(vm["checkpoint"].as<std::string>());
  lm::InferenceModel loaded = lm::load_inference_model(path);  // a training checkpoint or an int8 model
  const std::optional<lm::ChatTemplate> chat_template = lm::chat_template_for_checkpoint(loaded.info);
  TG_CHECK(chat_template.has_value(),
           "checkpoint '{}' has no chat template: instruction-tune it with train --sft (docs/training.md) and chat "
           "with that run",
           path);
  move_to_device(loaded, device, path);
  const auto codec =
      lm::codec_for_checkpoint(loaded.info, path, vm.count("tokenizer") ? vm["tokenizer"].as<std::string>() : "");
  const int64_t context = loaded.model->config.context_length;
  o.on_context_shift = [context](int64_t dropped, int64_t reread) {
    std::fprintf(stderr, "chat: the conversation outgrew the context of %lld tokens: dropped the oldest %lld turn%s, "
                         "read the remaining %lld tokens again\n",
                 (long long)context, (long long)dropped, dropped == 1 ? "" : "s", (long long)reread);
  };
  lm::ChatSession session(*loaded.model, *codec, *chat_template, o);

  const bool terminal = ::isatty(STDIN_FILENO) == 1;
  if (terminal)
    std::fprintf(stderr, "chat with %s on %s (context %lld tokens): one message per line; /reset, /quit or Ctrl-D\n",
                 path.c_str(), device.str().c_str(), (long long)context);
  std::string line;
  for (;;) {
    if (terminal) print_now("> ");
    if (!std::getline(std::cin, line)) {
      if (terminal) print_now("\n");
      break;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "/quit") break;
    if (line == "/reset") {
      session.reset();
      if (terminal)
        std::fprintf(stderr, "(the conversation is forgotten%s)\n", o.system ? "; the system message stays" : "");
      continue;
    }
    if (line.empty()) continue;
    try {
      const lm::ChatReply r = session.reply(line, print_now);
      print_now("\n");
      if (*stop_reason(r.stop)) std::fprintf(stderr, "chat: %s\n", stop_reason(r.stop));
    } catch (const Error& e) {
      if (!terminal) throw;  // a script learns of it by the exit status
      std::fprintf(stderr, "chat: %s\n", e.what());
    }
  }
  return 0;
}

}  // namespace tapegrad::cli
