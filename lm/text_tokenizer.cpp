// text_tokenizer.cpp — loading a BPE or llama2.c tokenizer from a path or a checkpoint's run (see text_tokenizer.h).
#include "lm/text_tokenizer.h"

#include <filesystem>
#include <fstream>

#include "autograd/io/exact_number.h"
#include "data/tokenizer_files.h"
#include "kernels/error.h"
#include "lm/llama2c_documents.h"
#include "lm/model_io.h"
#include "lm/run_dir.h"
#include "lm/text_split.h"

namespace tapegrad::lm {
namespace fs = std::filesystem;

namespace {

// The first byte of the file that is not blank (0 for an empty or unreadable file).
char first_non_blank_byte(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c))
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return c;
  return 0;
}

bool is_llama2c_file(const std::string& path) {
  if (path.ends_with(".bin")) return true;
  if (path.ends_with(".json")) return false;
  return first_non_blank_byte(path) != '{';
}

}  // namespace

TextTokenizer::TextTokenizer(std::unique_ptr<data::Tokenizer> bpe, std::string source)
    : bpe_(std::move(bpe)), source_(std::move(source)) {}

TextTokenizer::TextTokenizer(std::unique_ptr<Llama2cTokenizer> llama2c, std::string source)
    : llama2c_(std::move(llama2c)), source_(std::move(source)) {}

size_t TextTokenizer::vocab_size() const { return bpe_ ? bpe_->vocab_size() : llama2c_->vocab_size(); }

std::string TextTokenizer::document_separator() const {
  return bpe_ ? lm::document_separator(*bpe_) : std::string(kLlama2cDocumentSeparator);
}

data::DocumentEncoder TextTokenizer::document_encoder(int threads) const {
  return bpe_ ? data::bpe_document_encoder(*bpe_, threads) : llama2c_document_encoder(*llama2c_, threads);
}

TokenByteLengths TextTokenizer::byte_lengths(size_t model_vocab) const {
  return bpe_ ? token_byte_lengths(bpe_->model(), model_vocab) : token_byte_lengths(*llama2c_, model_vocab);
}

std::unique_ptr<TextCodec> TextTokenizer::codec() const {
  return bpe_ ? make_bpe_codec(bpe_->model()) : make_llama2c_codec(source_, llama2c_->vocab_size());
}

bool is_llama2c_tokenizer_path(const std::string& path) {
  std::error_code error;
  if (!fs::is_directory(path, error)) return fs::exists(path, error) && is_llama2c_file(path);
  const fs::path dir(path);
  return !fs::exists(dir / "tokenizer.json", error) && !fs::exists(dir / "vocab.json", error) &&
         fs::exists(dir / "tokenizer.bin", error);
}

TextTokenizer load_text_tokenizer(const std::string& path, size_t llama2c_vocab) {
  std::error_code error;
  TG_CHECK(fs::exists(path, error), "tokenizer '{}' does not exist", path);
  if (!is_llama2c_tokenizer_path(path))
    return TextTokenizer(std::make_unique<data::Tokenizer>(data::load_tokenizer_model(path)), path);
  const std::string file = fs::is_directory(path, error) ? (fs::path(path) / "tokenizer.bin").string() : path;
  const size_t vocab = llama2c_vocab ? llama2c_vocab : Llama2cTokenizer::count_tokens(file);
  return TextTokenizer(std::make_unique<Llama2cTokenizer>(file, vocab), file);
}

bool checkpoint_uses_llama2c_tokenizer(const optim::Checkpoint& ck) {
  const auto kind = ck.extra.find("run.tokenizer_kind");
  return kind != ck.extra.end() && kind->second == "llama2c";
}

TextTokenizer text_tokenizer_for_checkpoint(const optim::Checkpoint& ck, const std::string& path,
                                            const std::string& override_path) {
  const bool llama2c = override_path.empty() ? checkpoint_uses_llama2c_tokenizer(ck)
                                             : is_llama2c_tokenizer_path(override_path);
  if (!llama2c) {
    auto bpe = std::make_unique<data::Tokenizer>(tokenizer_for_checkpoint(ck, path, override_path));
    return TextTokenizer(std::move(bpe), override_path.empty()
                                             ? (fs::path(run_dir_of_checkpoint(path)) / "tokenizer.json").string()
                                             : override_path);
  }
  std::string source = override_path;
  if (source.empty()) {
    const std::string run = run_dir_of_checkpoint(path);
    source = (fs::path(run.empty() ? "." : run) / "tokenizer.bin").string();
    TG_CHECK(!run.empty() && fs::exists(source),
             "no tokenizer for checkpoint '{}': pass --tokenizer (the run directory holds no tokenizer.bin)", path);
  }
  // The tokenizer's own size: the model's vocabulary, less the chat template's tokens an --sft run appended.
  size_t vocab = 0;
  if (const auto chat = ck.extra.find("run.chat_tokenizer_vocab"); chat != ck.extra.end()) {
    vocab = parse_number<uint64_t>(chat->second, fmt::format("checkpoint '{}': run.chat_tokenizer_vocab", path));
  } else {
    const auto model_vocab = ck.config.find("vocab_size");
    TG_CHECK(model_vocab != ck.config.end(), "checkpoint '{}' has no config.vocab_size", path);
    vocab = parse_number<uint64_t>(model_vocab->second, fmt::format("checkpoint '{}': config.vocab_size", path));
  }
  return load_text_tokenizer(source, vocab);
}

}  // namespace tapegrad::lm
