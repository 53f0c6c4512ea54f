// test_data_helpers.h — shared helpers for the tests/test_data_*.cpp files: paths into ../shared,
// reading files, hex decoding, a scratch directory, the GPT-2 model, token files read back.
#pragma once
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "data/gpt2_files.h"
#include "data/token_file.h"
#include "tests/shared_fixture.h"

namespace tapegrad::data::testing {

inline std::string cs336_path(const std::string& relative) {
  return tapegrad::testing::shared_path("data/cs336/" + relative);
}
inline std::string corpora_path(const std::string& name) {
  return tapegrad::testing::shared_path("data/corpora/" + name);
}

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  REQUIRE(out.good());
}

inline std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// A fresh directory under the system temp dir, removed when the object dies.
struct ScratchDir {
  std::filesystem::path path;
  explicit ScratchDir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() /
           ("tapegrad_" + tag + "_" + std::to_string(std::hash<std::string>{}(tag + std::to_string(::getpid()))));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// The CS336 GPT-2 vocab/merges with <|endoftext|> as a special token (loaded once).
inline const BpeModel& gpt2_model_with_endoftext() {
  static const BpeModel model = load_gpt2_files(cs336_path("tests/fixtures/gpt2_vocab.json"),
                                                cs336_path("tests/fixtures/gpt2_merges.txt"), {"<|endoftext|>"});
  return model;
}

// Every token of a token file.
inline std::vector<uint32_t> read_tokens(const std::string& path) {
  const TokenFile file(path);
  std::vector<uint32_t> out(file.size());
  for (uint64_t i = 0; i < file.size(); ++i) out[i] = file[i];
  return out;
}

}  // namespace tapegrad::data::testing
