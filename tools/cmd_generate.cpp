// cmd_generate.cpp — `tapegrad generate`: text from a checkpoint, streamed to stdout as it is drawn
// (lm::generate: prefill + KV-cache decode; lm::Utf8Stream holds back a UTF-8 character split across
// tokens); prefill and decode tokens/s on stderr at the end. Past the model's context it slides (lm/generate.h)
// and says so once on stderr; --no-sliding refuses such a request before anything is printed.
//   tapegrad generate --checkpoint run/checkpoints/best.safetensors --prompt "Once upon a time" --max-tokens 200
//   tapegrad generate --checkpoint run --prompt "Once" --device cuda   (model and KV cache on the GPU: lm/generate.h)
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>

#include "data/file_io.h"
#include "lm/decode_threads.h"
#include "lm/generate.h"
#include "lm/model_io.h"
#include "lm/quantized_model.h"
#include "lm/text_codec.h"
#include "lm/trainer.h"  // parse_cuda_graph_flag
#include "lm/utf8_stream.h"
#include "optim/checkpoint.h"
#include "tools/commands.h"

namespace tapegrad::cli {

namespace {

std::string read_prompt(const po::variables_map& vm) {
  TG_CHECK(vm.count("prompt") + vm.count("prompt-file") <= 1, "give --prompt or --prompt-file, not both");
  if (vm.count("prompt")) return vm["prompt"].as<std::string>();
  std::string text;
  if (vm.count("prompt-file")) {
    text = data::read_whole_file(vm["prompt-file"].as<std::string>(), "--prompt-file");
  } else {
    TG_CHECK(::isatty(STDIN_FILENO) != 1, "no prompt: give --prompt TEXT, --prompt-file FILE, or pipe it on stdin");
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  return text;
}

}  // namespace

int cmd_generate(Args args) {
  po::options_description opts("tapegrad generate options");
  opts.add_options()("checkpoint", po::value<std::string>()->required(), "checkpoint file (.safetensors), or a run directory (its best checkpoint, else its newest)")(
      "tokenizer", po::value<std::string>(), "tokenizer.json or folder (default: the run's tokenizer.json)")(
      "prompt", po::value<std::string>(), "the text to continue")(
      "prompt-file", po::value<std::string>(), "read the prompt from this file (default: --prompt, else stdin)")(
      "max-tokens", po::value<int64_t>()->default_value(200), "tokens to generate at most")(
      "seed", po::value<uint64_t>()->default_value(1), "sampling seed (the same seed gives the same text on every machine)")(
      "sliding", po::bool_switch(),
      "past the context, draw each token from the last context tokens (the default; said once on stderr)")(
      "no-sliding", po::bool_switch(), "refuse a prompt + --max-tokens that does not fit the context")(
      "no-stop", po::bool_switch(), "do not stop at the end-of-text token")(
      "special-tokens", po::bool_switch(),
      "read special tokens in the prompt (<|endoftext|>, a chat template's <|user|> …) as their ids "
      "(default: as text)")(
      "device", po::value<std::string>()->default_value("cpu"), "where the model runs: cpu, cuda or cuda:N")(
      "cuda-graph", po::value<std::string>()->default_value("on"),
      "on|off: with --device cuda, replay each decode step as a CUDA graph (the same tokens, fewer launches)")(
      "threads", po::value<int>()->default_value(0),
      "CPU threads (0: by the model's size, capped by the idle cores: lm/decode_threads.h)");
  add_sampling_options(opts);
  add_precision_option(opts, "the model");
  po::variables_map vm;
  if (!parse(args, opts, vm, "tapegrad generate --checkpoint C [--prompt TEXT | --prompt-file F | < stdin] [options]"))
    return 0;
  set_threads(vm["threads"].as<int>());
  const Device device = parse_device_flag(vm["device"].as<std::string>());  // refused before any work
  const nn::PrecisionGuard precision(precision_flag(vm, device));

  lm::GenerateOptions o;
  o.max_tokens = vm["max-tokens"].as<int64_t>();
  o.sampling = sampling_options(vm);  // bad options are refused before the model is read
  o.seed = vm["seed"].as<uint64_t>();
  TG_CHECK(!(vm["sliding"].as<bool>() && vm["no-sliding"].as<bool>()), "give --sliding or --no-sliding, not both");
  o.sliding = !vm["no-sliding"].as<bool>();
  o.cuda_graph = lm::parse_cuda_graph_flag(vm["cuda-graph"].as<std::string>());
  const std::string prompt = read_prompt(vm);

  const std::string path = checkpoint_flag(vm["checkpoint"].as<std::string>());
  lm::InferenceModel loaded = lm::load_inference_model(path);  // a training checkpoint or an int8 model
  move_to_device(loaded, device, path);
  const optim::Checkpoint& ck = loaded.info;
  const auto& model = loaded.model;
  if (vm["threads"].as<int>() == 0) set_num_threads(lm::decode_threads_here(model->config.parameter_count()));
  const auto codec =
      lm::codec_for_checkpoint(ck, path, vm.count("tokenizer") ? vm["tokenizer"].as<std::string>() : "");
  TG_CHECK(int64_t(codec->vocab_size()) == model->config.vocab_size,
           "the tokenizer has {} tokens but the model's vocabulary is {}: another tokenizer?", codec->vocab_size(),
           model->config.vocab_size);
  if (!vm["no-stop"].as<bool>()) o.stop_token = codec->stop_token();
  // Special ids only when asked for: otherwise "<|assistant|>" in a prompt is text, whether the tokenizer holds the
  // chat template's tokens or they were appended to it (lm/chat_template.h).
  const std::vector<uint32_t> prompt_ids =
      vm["special-tokens"].as<bool>() ? codec->encode_prompt(prompt) : codec->encode_prompt_plain(prompt);
  lm::check_generate_request(*model, prompt_ids, o);  // refused before anything is printed

  std::fputs(prompt.c_str(), stdout);
  std::fflush(stdout);
  lm::Utf8Stream stream;
  uint32_t prev = prompt_ids.back();
  const lm::GenerateResult r = lm::generate(*model, prompt_ids, o, [&](uint32_t id) {
    if (o.stop_token && id == *o.stop_token) return;  // the end marker is not printed
    std::fputs(stream.push(codec->decode_token(prev, id)).c_str(), stdout);
    std::fflush(stdout);
    prev = id;
  });
  std::fputs((stream.finish() + "\n").c_str(), stdout);
  std::fflush(stdout);
  const int64_t context = model->config.context_length;
  if (r.slid_tokens > 0)
    std::fprintf(stderr,
                 "generate: the text outgrew the context of %lld tokens: sliding (each token past it re-reads the last "
                 "%lld); --no-sliding refuses such a request instead\n",
                 (long long)context, (long long)context);
  const std::string graphs = r.graph_steps > 0 ? fmt::format(", {} as CUDA graph replays", r.graph_steps) : "";
  const std::string threads =
      device.type == DeviceType::CPU ? fmt::format("; {} thread{}", num_threads(), num_threads() == 1 ? "" : "s") : "";
  std::fprintf(stderr,
               "prefill: %lld tokens in %.1f ms (%.0f tok/s); decode: %lld tokens in %.2f s (%.1f tok/s%s)%s%s\n",
               (long long)r.prefill_tokens, r.prefill_seconds * 1e3, double(r.prefill_tokens) / r.prefill_seconds,
               (long long)r.decode_tokens, r.decode_seconds,
               r.decode_tokens > 0 ? double(r.decode_tokens) / r.decode_seconds : 0.0, graphs.c_str(), threads.c_str(),
               r.stopped_at_stop_token ? "; stopped at the end-of-text token" : "");
  return 0;
}

}  // namespace tapegrad::cli
