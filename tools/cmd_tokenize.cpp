// cmd_tokenize.cpp — `tapegrad tokenize train` (streamed byte-level BPE training, written as
// DIR/tokenizer.json + vocab.json + merges.txt) and `tapegrad tokenize encode` (text to a token file,
// with a progress line on stderr). Both take several --input files and directories, and JSONL
// (data/text_inputs.h). Parsing, checks and reporting only: the work is in data/.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "data/bpe_trainer.h"
#include "data/document_encode.h"
#include "data/document_reader.h"
#include "data/stream_encode.h"
#include "data/text_inputs.h"
#include "data/tokenizer.h"
#include "lm/text_tokenizer.h"
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

// --out FILE can be created (its directory exists and is writable) and is none of the inputs.
void check_out_file(const std::string& out, const std::vector<data::TextInput>& inputs) {
  std::error_code error;
  TG_CHECK(!fs::is_directory(out, error), "--out {}: is a directory", out);
  for (const data::TextInput& input : inputs)
    TG_CHECK(!fs::exists(out, error) || !fs::equivalent(out, input.path, error), "--out {}: is the --input file{}", out,
             inputs.size() > 1 ? " " + input.path : "");
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

// The separator a tokenizer with these special tokens puts between documents (lm::document_separator).
std::string separator_for(const std::vector<std::string>& special_tokens) {
  return special_tokens.empty() ? std::string("\n\n") : special_tokens.front();
}

// Temp files removed when this goes out of scope (also on an error).
struct TempFiles {
  std::vector<std::string> paths;
  TempFiles() = default;
  TempFiles(const TempFiles&) = delete;
  TempFiles& operator=(const TempFiles&) = delete;
  ~TempFiles() {
    std::error_code ignored;
    for (const std::string& p : paths) fs::remove(p, ignored);
  }
};

// The documents of a JSONL input as plain text (each followed by the separator) in `path`, for the
// BPE trainer, which reads plain-text files. Throws on bad JSONL (FILE:LINE: ...).
void write_jsonl_documents(const data::TextInput& input, const std::string& separator, const std::string& field,
                           const std::string& path) {
  data::DocumentReader reader({input}, separator, field);
  std::ofstream out(path, std::ios::binary);
  TG_CHECK(out.good(), "cannot create the temporary file {}", path);
  std::string document;
  while (reader.next(document)) out << document;
  out.flush();
  TG_CHECK(out.good(), "cannot write the temporary file {} (disk full?)", path);
}

int train(Args args) {
  po::options_description opts("tapegrad tokenize train options");
  opts.add_options()("input", po::value<std::vector<std::string>>()->multitoken()->required(),
                     "text files, directories (their *.txt, *.text, *.md, *.jsonl) and JSONL files to train on, "
                     "in this order (repeat the flag or give several)")(
      "text-field", po::value<std::string>()->default_value("text"), "JSONL: the field that holds each document")(
      "vocab-size", po::value<int64_t>()->required(), "vocabulary size: special tokens + 256 bytes + merges")(
      "special", po::value<std::vector<std::string>>()->default_value({"<|endoftext|>"}, "<|endoftext|>"),
      "a special token (repeat the flag for several; '--special none' for none)")(
      "threads", po::value<int>()->default_value(0), "pretokenization threads (0: all cores)")(
      "out", po::value<std::string>()->required(),
      "directory for tokenizer.json, vocab.json and merges.txt (created when missing)");
  po::variables_map vm;
  if (!parse(args, opts, vm,
             "tapegrad tokenize train --input PATH... [--text-field NAME] --vocab-size N [--special TOKEN]... "
             "[--threads N] --out DIR"))
    return 0;
  const auto given = vm["input"].as<std::vector<std::string>>();
  const std::string text_field = vm["text-field"].as<std::string>();
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
  const std::vector<data::TextInput> inputs = data::resolve_text_inputs(given, "--input");
  const bool created = prepare_out_dir(out);

  fmt::print("training a byte-level BPE on {} ({} file(s), {:.1f} MB), vocab {}, {} thread(s)\n",
             data::describe_inputs(given), inputs.size(), megabytes(data::total_bytes(inputs)), vocab_size,
             options.num_threads);
  std::fflush(stdout);
  try {
    const auto start = Clock::now();
    // Plain-text files are trained on as they are; a JSONL file's documents go through a temp file.
    TempFiles temps;
    std::vector<std::string> paths;
    for (const data::TextInput& input : inputs) {
      if (input.format == data::TextFormat::plain) {
        paths.push_back(input.path);
        continue;
      }
      temps.paths.push_back((fs::path(out) / fmt::format(".jsonl-text-{}.tmp", temps.paths.size())).string());
      write_jsonl_documents(input, separator_for(options.special_tokens), text_field, temps.paths.back());
      paths.push_back(temps.paths.back());
    }
    const data::BpeModel model = data::train_bpe_files(paths, options);
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
                     "tokenizer.json, or a directory with tokenizer.json or vocab.json + merges.txt, or llama2.c's tokenizer.bin (any *.bin)")(
      "input", po::value<std::vector<std::string>>()->multitoken()->required(),
      "text files, directories (their *.txt, *.text, *.md, *.jsonl) and JSONL files to encode, in this order")(
      "text-field", po::value<std::string>()->default_value("text"), "JSONL: the field that holds each document")(
      "out", po::value<std::string>()->required(), "token file to write (written as OUT.tmp, renamed when complete)")(
      "threads", po::value<int>()->default_value(0), "encoding threads (0: all cores)");
  po::variables_map vm;
  if (!parse(args, opts, vm,
             "tapegrad tokenize encode --tokenizer DIR|FILE --input PATH... [--text-field NAME] --out TOKENS.bin "
             "[--threads N]"))
    return 0;
  const auto given = vm["input"].as<std::vector<std::string>>();
  const std::string out = vm["out"].as<std::string>();
  const int threads = thread_count(vm["threads"].as<int>());
  const std::vector<data::TextInput> inputs = data::resolve_text_inputs(given, "--input");
  check_out_file(out, inputs);
  const std::string tokenizer_path = vm["tokenizer"].as<std::string>();
  const auto start = Clock::now();
  BytesProgress progress;
  const auto report = [&](uint64_t done, uint64_t total) { progress.update(done, total); };
  uint64_t tokens = 0, documents = 0;
  size_t vocab = 0;
  // lm/text_tokenizer.h: a BPE tokenizer.json / folder, or llama2.c's tokenizer.bin (every document as BOS + its
  // pieces, as llama2.c prepares its data).
  const lm::TextTokenizer tokenizer = lm::load_text_tokenizer(tokenizer_path);
  vocab = tokenizer.vocab_size();
  if (tokenizer.kind() == lm::TokenizerKind::Bpe && inputs.size() == 1 && inputs[0].format == data::TextFormat::plain) {
    // One text file: streamed in blocks cut where the ids stay exactly those of encoding it whole.
    data::Tokenizer bpe(*tokenizer.bpe_model());
    tokens = data::encode_file_to_token_file(bpe, inputs[0].path, out, data::kEncodeBlockBytes * size_t(threads), report,
                                             threads);
  } else {
    data::DocumentReader reader(inputs, tokenizer.document_separator(), vm["text-field"].as<std::string>());
    const data::TokenFileSummary summary = data::encode_documents_to_token_file(
        reader, tokenizer.document_encoder(threads), vocab, out, data::kDocumentChunkBytes, report);
    tokens = summary.tokens, documents = summary.documents;
  }
  const uint64_t bytes = data::total_bytes(inputs);
  progress.update(bytes, bytes);
  progress.finish();
  const double seconds = seconds_since(start);
  fmt::print("{} tokens written to {} (vocab {}){}, {:.2f} bytes/token, {:.2f} s\n", tokens, out, vocab,
             documents ? fmt::format(", {} documents from {} file(s)", documents, inputs.size()) : "",
             tokens ? double(bytes) / double(tokens) : 0.0, seconds);
  return 0;
}

int help() {
  fmt::print(
      "usage: tapegrad tokenize <subcommand> [options]   (tapegrad tokenize <subcommand> --help for its options)\n\n"
      "subcommands:\n"
      "  train   train a byte-level BPE on text; writes DIR/tokenizer.json, vocab.json, merges.txt\n"
      "          tapegrad tokenize train --input PATH... --vocab-size N [--special TOKEN]... [--threads N] --out DIR\n"
      "  encode  encode text into a token file (the format of data/token_file.h)\n"
      "          tapegrad tokenize encode --tokenizer DIR|FILE --input PATH... --out TOKENS.bin [--threads N]\n"
      "  PATH: a text file, a directory (every *.txt, *.text, *.md, *.jsonl below it, sorted by path) or a\n"
      "  JSONL file (*.jsonl: one document per line in the field --text-field, default \"text\")\n");
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
