// tool_corpus.h — what the tool tests share: the repository's corpus cut into training and validation
// text, a 512-token BPE tokenizer trained on it, both texts encoded; reading metrics.jsonl.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "test_data_helpers.h"
#include "tool_runner.h"

namespace tapegrad::testing {

// The repository's corpus (corpus/tinystories_head.txt): its first ~120 KB of whole stories as
// training text and the next ~20 KB as validation text.
struct ToolData {
  std::string train_txt, val_txt, tokenizer, train_bin, val_bin;
};

inline ToolData prepare_data(const tapegrad::data::testing::ScratchDir& dir) {
  const std::string corpus =
      tapegrad::data::testing::read_all(std::string(TAPEGRAD_SOURCE_DIR) + "/corpus/tinystories_head.txt");
  const std::string sep = "<|endoftext|>\n";
  const size_t a = corpus.find(sep, 120000) + sep.size(), b = corpus.find(sep, a + 20000) + sep.size();
  ToolData d{dir.file("train.txt"), dir.file("val.txt"), dir.file("tok"), dir.file("train.bin"), dir.file("val.bin")};
  tapegrad::data::testing::write_all(d.train_txt, corpus.substr(0, a));
  tapegrad::data::testing::write_all(d.val_txt, corpus.substr(a, b - a));
  ToolResult r = run_tool({"tokenize", "train", "--input", d.train_txt, "--vocab-size", "512", "--out", d.tokenizer},
                          dir.file("tokenize"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (const char* f : {"tokenizer.json", "vocab.json", "merges.txt"})
    REQUIRE(std::filesystem::exists(std::filesystem::path(d.tokenizer) / f));
  for (auto [txt, bin] : {std::pair{d.train_txt, d.train_bin}, std::pair{d.val_txt, d.val_bin}}) {
    r = run_tool({"tokenize", "encode", "--tokenizer", d.tokenizer, "--input", txt, "--out", bin}, dir.file("encode"));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  return d;
}

// The records of a JSON-lines file.
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  for (const std::string& line : lines_of(ToolProcess::slurp(path))) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The losses (train and validation) of a metrics.jsonl, by kind and step.
inline std::vector<std::tuple<std::string, int64_t, double>> losses(const std::string& path) {
  std::vector<std::tuple<std::string, int64_t, double>> out;
  for (const auto& j : read_jsonl(path))
    out.emplace_back(j["kind"], j["step"], j["kind"] == "train" ? j["loss"].get<double>() : j["val_loss"].get<double>());
  return out;
}

}  // namespace tapegrad::testing
