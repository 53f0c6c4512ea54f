// tokenizer_files.cpp — which files a tokenizer path holds, the directory writer, the fingerprint.
#include "data/tokenizer_files.h"

#include <algorithm>
#include <filesystem>

#include "data/gpt2_files.h"
#include "data/hf_tokenizer_json.h"
#include "kernels/error.h"

namespace tapegrad::data {
namespace fs = std::filesystem;

BpeModel load_tokenizer_model(const std::string& dir_or_file) {
  std::error_code error;
  const fs::file_status status = fs::status(dir_or_file, error);
  TG_CHECK(fs::exists(status), "tokenizer '{}' does not exist", dir_or_file);
  if (!fs::is_directory(status)) return load_hf_tokenizer_json(dir_or_file);
  const fs::path dir(dir_or_file);
  if (fs::exists(dir / "tokenizer.json", error)) return load_hf_tokenizer_json((dir / "tokenizer.json").string());
  TG_CHECK(fs::exists(dir / "vocab.json", error) && fs::exists(dir / "merges.txt", error),
           "the folder {} holds no tokenizer (tokenizer.json, vocab.json + merges.txt, or llama2.c's tokenizer.bin)", dir_or_file);
  BpeModel model = load_gpt2_files((dir / "vocab.json").string(), (dir / "merges.txt").string());
  if (std::find(model.vocab.begin(), model.vocab.end(), "<|endoftext|>") != model.vocab.end())
    model.special_tokens = {"<|endoftext|>"};
  return model;
}

void save_tokenizer_dir(const BpeModel& model, const std::string& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  TG_CHECK(fs::is_directory(dir), "cannot create the directory {}{}", dir,
           error ? ": " + error.message() : std::string());
  const fs::path d(dir);
  save_hf_tokenizer_json(model, (d / "tokenizer.json").string());
  save_gpt2_files(model, (d / "vocab.json").string(), (d / "merges.txt").string());
}

std::string tokenizer_fingerprint(const BpeModel& model) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  const auto add_bytes = [&](const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) hash = (hash ^ p[i]) * 0x100000001b3ull;  // FNV-1a 64 prime
  };
  const auto add_size = [&](uint64_t n) {
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(n >> (8 * i));
    add_bytes(le, 8);
  };
  const auto add_string = [&](const std::string& s) {
    add_size(s.size());
    add_bytes(s.data(), s.size());
  };
  add_size(model.vocab.size());
  for (const std::string& token : model.vocab) add_string(token);
  add_size(model.merges.size());
  for (const auto& [left, right] : model.merges) add_string(left), add_string(right);
  add_size(model.special_tokens.size());
  for (const std::string& special : model.special_tokens) add_string(special);
  return fmt::format("{:016x}", hash);
}

}  // namespace tapegrad::data
