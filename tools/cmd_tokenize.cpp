// cmd_tokenize.cpp — `tapegrad tokenize train` (streamed byte-level BPE training, written as
// DIR/tokenizer.json + vocab.json + merges.txt) and `tapegrad tokenize encode` (a text file to a token
// file, with a progress line). Parsing, checks and reporting only: the work is in data/.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "data/bpe_trainer.h"
#include "data/stream_encode.h"
#include "data/tokenizer.h"
#include "data/tokenizer_files.h"
#include "kernels/error.h"
#include "tools/commands.h"
#include "tools/progress.h"

namespace tapegrad::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
double megabytes(uint64_t bytes) { return double(bytes) / 1e6; }

int thread_count(int requested) {
  TG_CHECK(requested >= 0, "--threads must be >= 0 (0: all cores), but is {}", requested);
  return requested > 0 ? requested : int(std::max(1u, std::thread::hardware_concurrency()));
}

void check_readable(const std::string& path, const char* flag) {
  std::error_code error;
  TG_CHECK(fs::exists(path, error), "{} {}: no such file", flag, path);
  TG_CHECK(!fs::is_directory(path, error), "{} {}: is a directory, not a file", flag, path);
  TG_CHECK(std::ifstream(path, std::ios::binary).good(), "{} {}: cannot open it for reading", flag, path);
}

// "MB done / total, MB/s, ETA" on stdout: rewritten in place with '\r' on a terminal (at most 10
// times a second), otherwise a plain line at most once a second; finish() prints the final state.
class BytesProgressLine {
 public:
  BytesProgressLine() : tty_(::isatty(STDOUT_FILENO) == 1), start_(Clock::now()), last_(start_) {}

  void update(uint64_t done, uint64_t total) {
    done_ = done, total_ = total;
    const auto now = Clock::now();
    if (now - last_ < (tty_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000))) return;
    last_ = now;
    print();
  }
  void finish() {
    print();
    if (tty_) std::fputc('\n', stdout);
    std::fflush(stdout);
  }

 private:
  void print() {
    const double elapsed = seconds_since(start_);
    const double rate = elapsed > 0 ? megabytes(done_) / elapsed : 0;
    const std::string line =
        fmt::format("{:.1f} / {:.1f} MB, {:.1f} MB/s, ETA {}", megabytes(done_), megabytes(total_), rate,
                    rate > 0 ? format_duration(megabytes(total_ - std::min(done_, total_)) / rate) : "?");
    if (tty_) {
      fmt::print("\r{:<60}", line);  // padded: a shorter line must cover the longer one before it
    } else {
      fmt::print("{}\n", line);
    }
    std::fflush(stdout);
  }

  bool tty_;
  Clock::time_point start_, last_;
  uint64_t done_ = 0, total_ = 0;
};

// --out FILE can be created (its directory exists and is writable) and is not --input.
void check_out_file(const std::string& out, const std::string& input) {
  std::error_code error;
  TG_CHECK(!fs::is_directory(out, error), "--out {}: is a directory", out);
  TG_CHECK(!fs::exists(out, error) || !fs::equivalent(out, input, error), "--out {}: is the --input file", out);
  const fs::path parent = fs::path(out).parent_path().empty() ? fs::path(".") : fs::path(out).parent_path();
  TG_CHECK(fs::is_directory(parent, error), "--out {}: the directory {} does not exist", out, parent.string());
  TG_CHECK(::access(parent.c_str(), W_OK) == 0, "--out {}: the directory {} is not writable", out, parent.string());
}

// The special tokens of --special: "none" alone means none; empty values are refused.
std::vector<std::string> special_tokens(const std::vector<std::string>& given) {
  if (given.size() == 1 && given[0] == "none") return {};
  for (const std::string& s : given) {
    TG_CHECK(!s.empty(), "--special: a special token cannot be empty (use --special none for no special token)");
    TG_CHECK(s != "none", "--special none cannot be combined with other special tokens");
  }
  return given;
}

// --out DIR exists as a directory (created here when missing) and can be written; true when created.
bool prepare_out_dir(const std::string& dir) {
  std::error_code error;
  if (fs::exists(dir, error)) {
    TG_CHECK(fs::is_directory(dir, error), "--out {}: exists and is not a directory", dir);
    TG_CHECK(::access(dir.c_str(), W_OK) == 0, "--out {}: the directory is not writable", dir);
    return false;
  }
  fs::create_directories(dir, error);
  TG_CHECK(!error && fs::is_directory(dir), "--out {}: cannot create the directory: {}", dir, error.message());
  return true;
}

int train(Args args) {
  po::options_description opts("tapegrad tokenize train options");
  opts.add_options()("input", po::value<std::vector<std::string>>()->multitoken()->required(),
                     "text file(s) to train on (several: trained on their concatenation)")(
      "vocab-size", po::value<int64_t>()->required(), "vocabulary size: special tokens + 256 bytes + merges")(
      "special", po::value<std::vector<std::string>>()->default_value({"<|endoftext|>"}, "<|endoftext|>"),
      "a special token (repeat the flag for several; '--special none' for none)")(
      "threads", po::value<int>()->default_value(0), "pretokenization threads (0: all cores)")(
      "out", po::value<std::string>()->required(),
      "directory for tokenizer.json, vocab.json and merges.txt (created when missing)");
  po::variables_map vm;
  if (!parse(args, opts, vm,
             "tapegrad tokenize train --input FILE... --vocab-size N [--special TOKEN]... [--threads N] --out DIR"))
    return 0;
  const auto inputs = vm["input"].as<std::vector<std::string>>();
  const auto vocab_size = vm["vocab-size"].as<int64_t>();
  data::BpeTrainOptions options;
  options.special_tokens = special_tokens(vm["special"].as<std::vector<std::string>>());
  options.num_threads = thread_count(vm["threads"].as<int>());
  const std::string out = vm["out"].as<std::string>();
  const auto base = int64_t(options.special_tokens.size()) + 256;
  TG_CHECK(vocab_size >= base && vocab_size <= (int64_t(1) << 32),
           "--vocab-size {}: must be at least {} ({} special token(s) + 256 byte tokens) and at most 2^32", vocab_size,
           base, options.special_tokens.size());
  options.vocab_size = size_t(vocab_size);
  uint64_t bytes = 0;
  for (const std::string& input : inputs) {
    check_readable(input, "--input");
    std::error_code unknown;
    bytes += fs::file_size(input, unknown);
  }
  const bool created = prepare_out_dir(out);

  fmt::print("training a byte-level BPE on {} ({:.1f} MB), vocab {}, {} thread(s)\n",
             inputs.size() == 1 ? inputs[0] : fmt::format("{} files", inputs.size()), megabytes(bytes), vocab_size,
             options.num_threads);
  std::fflush(stdout);
  try {
    const auto start = Clock::now();
    const data::BpeModel model = data::train_bpe_files(inputs, options);
    const double seconds = seconds_since(start);
    data::save_tokenizer_dir(model, out);
    fmt::print("vocab {} = {} special + 256 bytes + {} merges, trained in {:.2f} s\n", model.vocab.size(),
               model.special_tokens.size(), model.merges.size(), seconds);
    fmt::print("wrote {}/tokenizer.json, vocab.json, merges.txt (fingerprint {})\n", out,
               data::tokenizer_fingerprint(model));
  } catch (...) {
    if (created) {  // leave nothing behind in a directory this command made
      std::error_code ignored;
      for (const char* name : {"tokenizer.json", "vocab.json", "merges.txt"}) fs::remove(fs::path(out) / name, ignored);
      fs::remove(out, ignored);  // only when empty
    }
    throw;
  }
  return 0;
}

int encode(Args args) {
  po::options_description opts("tapegrad tokenize encode options");
  opts.add_options()("tokenizer", po::value<std::string>()->required(),
                     "tokenizer.json, or a directory with tokenizer.json or vocab.json + merges.txt")(
      "input", po::value<std::string>()->required(), "text file to encode")(
      "out", po::value<std::string>()->required(), "token file to write (written as OUT.tmp, renamed when complete)")(
      "threads", po::value<int>()->default_value(0), "encoding threads (0: all cores)");
  po::variables_map vm;
  if (!parse(args, opts, vm, "tapegrad tokenize encode --tokenizer DIR|FILE --input TEXT --out TOKENS.bin [--threads N]"))
    return 0;
  const std::string input = vm["input"].as<std::string>(), out = vm["out"].as<std::string>();
  const int threads = thread_count(vm["threads"].as<int>());
  check_readable(input, "--input");
  check_out_file(out, input);
  data::Tokenizer tokenizer(data::load_tokenizer_model(vm["tokenizer"].as<std::string>()));

  const auto start = Clock::now();
  BytesProgressLine progress;
  const uint64_t tokens = data::encode_file_to_token_file(
      tokenizer, input, out, data::kEncodeBlockBytes * size_t(threads),
      [&](uint64_t done, uint64_t total) { progress.update(done, total); }, threads);
  std::error_code unknown;
  const uint64_t bytes = fs::file_size(input, unknown);
  progress.update(bytes, bytes);
  progress.finish();
  const double seconds = seconds_since(start);
  fmt::print("{} tokens written to {} (vocab {}), {:.2f} bytes/token, {:.2f} s\n", tokens, out, tokenizer.vocab_size(),
             tokens ? double(bytes) / double(tokens) : 0.0, seconds);
  return 0;
}

int help() {
  fmt::print(
      "usage: tapegrad tokenize <subcommand> [options]   (tapegrad tokenize <subcommand> --help for its options)\n\n"
      "subcommands:\n"
      "  train   train a byte-level BPE on text files; writes DIR/tokenizer.json, vocab.json, merges.txt\n"
      "          tapegrad tokenize train --input FILE... --vocab-size N [--special TOKEN]... [--threads N] --out DIR\n"
      "  encode  encode a text file into a token file (the format of data/token_file.h)\n"
      "          tapegrad tokenize encode --tokenizer DIR|FILE --input TEXT --out TOKENS.bin [--threads N]\n");
  return 0;
}

}  // namespace

int cmd_tokenize(Args args) {
  TG_CHECK(!args.empty(), "tokenize: expected a subcommand, train or encode (try: tapegrad tokenize --help)");
  const std::string sub = args[0];
  if (sub == "--help" || sub == "-h" || sub == "help") return help();
  if (sub == "train") return train(args.subspan(1));
  if (sub == "encode") return encode(args.subspan(1));
  throw Error(fmt::format("tokenize: unknown subcommand '{}' (expected train or encode)", sub));
}

}  // namespace tapegrad::cli
