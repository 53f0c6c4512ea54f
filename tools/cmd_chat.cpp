// cmd_chat.cpp — `tapegrad chat`: a conversation with an instruction-tuned checkpoint (lm::ChatSession:
// the chat template, the KV cache kept across turns, old turns dropped when the context is full), each
// answer streamed to stdout as it is decoded.
//   tapegrad chat --checkpoint sft_run --system "You answer briefly."        (a terminal: "> " prompts)
//   printf 'reverse: abc\n/reset\nreverse: xyz\n' | tapegrad chat --checkpoint sft_run --greedy
// One user turn per line; /commands (lm/chat_commands.h: /help, /reset, /quit) are not sent to the model, and an
// unknown one is refused naming the nearest. The prompt "> " is shown only when stdin is a terminal; piped, each
// message gets one line of stdout — an empty message an empty line — so answers line up with questions (a
// message that cannot fit the context, or an unknown /command, is then an error; on a terminal, a message).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "lm/chat_commands.h"
#include "lm/chat_session.h"
#include "lm/chat_template.h"
#include "lm/decode_threads.h"
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

// An error as one stderr line starting "chat: " — once, also when the message already names chat.
void print_error(std::string_view what) {
  const std::string_view prefix = "chat: ";
  if (what.starts_with(prefix)) what.remove_prefix(prefix.size());
  std::fprintf(stderr, "chat: %.*s\n", int(what.size()), what.data());
}

}  // namespace

int cmd_chat(Args args) {
  po::options_description opts("tapegrad chat options");
  opts.add_options()("checkpoint", po::value<std::string>()->required(),
                     "an instruction-tuned checkpoint (train --sft), or its run directory")(
      "tokenizer", po::value<std::string>(), "tokenizer.json or folder (default: the run's tokenizer)")(
      "system", po::value<std::string>(), "the system message, kept when old turns are dropped and on /reset")(
      "max-tokens", po::value<int64_t>()->default_value(256), "tokens per answer at most")(
      "answer-room", po::value<int64_t>()->default_value(0),
      "positions kept free before an answer starts, the oldest turns dropped to make them (0: min(--max-tokens, "
      "context / 4) + 1)")(
      "seed", po::value<uint64_t>()->default_value(1), "sampling seed (the same seed gives the same conversation)")(
      "stop", po::value<std::vector<std::string>>()->composing(),
      "end an answer before this text (may be given several times; besides the end-of-turn token)")(
      "device", po::value<std::string>()->default_value("cpu"), "where the model runs: cpu, cuda or cuda:N")(
      "cuda-graph", po::value<std::string>()->default_value("on"),
      "on|off: on a GPU, replay each decode step as one captured CUDA graph (the same conversation)")(
      "threads", po::value<int>()->default_value(0),
      "CPU threads (0: by the model's size, capped by the idle cores: lm/decode_threads.h)");
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
  o.answer_room = vm["answer-room"].as<int64_t>();
  TG_CHECK(o.answer_room == 0 || o.answer_room >= 2,
           "--answer-room must be 0 (the default) or at least 2 (an answer id and the closing end token), but is {}",
           o.answer_room);
  o.cuda_graph = lm::parse_cuda_graph_flag(vm["cuda-graph"].as<std::string>());

  const std::string path = checkpoint_flag(vm["checkpoint"].as<std::string>());
  lm::InferenceModel loaded = lm::load_inference_model(path);  // a training checkpoint or an int8 model
  const std::optional<lm::ChatTemplate> chat_template = lm::chat_template_for_checkpoint(loaded.info);
  TG_CHECK(chat_template.has_value(),
           "checkpoint '{}' has no chat template: instruction-tune it with train --sft (docs/training.md) and chat "
           "with that run",
           path);
  move_to_device(loaded, device, path);
  if (vm["threads"].as<int>() == 0) set_num_threads(lm::decode_threads_here(loaded.model->config.parameter_count()));
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
  const std::string threads =
      device.type == DeviceType::CPU ? fmt::format(", {} thread{}", num_threads(), num_threads() == 1 ? "" : "s") : "";
  if (terminal)
    std::fprintf(stderr,
                 "chat with %s on %s%s (context %lld tokens): one message per line; /help, /reset, /quit or Ctrl-D\n",
                 path.c_str(), device.str().c_str(), threads.c_str(), (long long)context);
  std::string input;
  for (;;) {
    if (terminal) print_now("> ");
    if (!std::getline(std::cin, input)) {
      if (terminal) print_now("\n");
      break;
    }
    const lm::ChatLine line = lm::read_chat_line(input);
    if (line.kind == lm::ChatLineKind::Quit) break;
    switch (line.kind) {
      case lm::ChatLineKind::Reset:
        session.reset();
        if (terminal)
          std::fprintf(stderr, "(the conversation is forgotten%s)\n", o.system ? "; the system message stays" : "");
        continue;
      case lm::ChatLineKind::Help:
        std::fprintf(stderr, "one message per line; the commands:\n%s", lm::chat_help().c_str());
        continue;
      case lm::ChatLineKind::Empty:
        if (!terminal) print_now("\n");  // piped: one line out per line in
        continue;
      case lm::ChatLineKind::Refused:
        TG_CHECK(terminal, "chat: {}", line.text);  // a script learns of it by the exit status
        print_error(line.text);
        continue;
      default: break;
    }
    try {
      const lm::ChatReply r = session.reply(line.text, print_now);
      print_now("\n");
      if (*stop_reason(r.stop)) std::fprintf(stderr, "chat: %s\n", stop_reason(r.stop));
    } catch (const Error& e) {
      if (!terminal) throw;  // a script learns of it by the exit status
      print_error(e.what());
    }
  }
  return 0;
}

}  // namespace tapegrad::cli
