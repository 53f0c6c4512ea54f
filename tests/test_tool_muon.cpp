// test_tool_muon.cpp — `tapegrad train --recipe modern / --optimizer muon / --schedule wsd` end to end: what
// config.json and the checkpoints record, bits per byte on the progress line and in metrics.jsonl, `info`
// naming Muon, `--resume` keeping the run's optimizer, and a resume with another optimizer refused in one line.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "lm/run_dir.h"
#include "test_data_helpers.h"
#include "tool_corpus.h"
#include "tool_runner.h"

using tapegrad::data::testing::ScratchDir;
using namespace tapegrad::testing;

namespace {

std::vector<std::string> args(const ToolData& d, const std::string& out, int steps, std::vector<std::string> more) {
  std::vector<std::string> a{"train", "--train", d.train_bin, "--val", d.val_bin, "--tokenizer", d.tokenizer,
                             "--model", "micro", "--batch-size", "4", "--steps", std::to_string(steps),
                             "--warmup-steps", "1", "--checkpoint-every", "4", "--threads", "1", "--out", out};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST_CASE("tool: train --recipe modern records Muon and WSD, reports bits per byte, resumes as Muon", "[tool][muon]") {
  ScratchDir dir("tool_muon");
  const ToolData d = prepare_data(dir);
  const std::string run = dir.file("run");
  ToolResult r = run_tool(args(d, run, 4, {"--recipe", "modern"}), dir.file("a"));
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("bits/byte") != std::string::npos);  // the evaluation's line and the final one
  const auto config = nlohmann::json::parse(ToolProcess::slurp(run + "/config.json"));
  CHECK(config["train"]["optimizer"] == "muon");
  CHECK(config["train"]["schedule"] == "wsd");
  CHECK(config["train"]["lr"] == 0.006);
  CHECK(config["train"]["min_lr"] == 0);
  CHECK(config["run"]["recipe"] == "modern");
  bool bpb = false;
  for (const auto& j : read_jsonl(run + "/metrics.jsonl"))
    if (j["kind"] == "eval") bpb = j.contains("val_bpb") && j["val_bpb"].get<double>() > 0;
  CHECK(bpb);

  // `eval` with the tokenizer beside a token file reports bits per byte too, after the usual figures.
  r = run_tool({"eval", "--checkpoint", run, "--data", d.val_bin, "--tokenizer", d.tokenizer, "--threads", "1"},
               dir.file("eval"));
  CHECK(r.exit_code == 0);
  CHECK(r.out.find(" windows)  ") != std::string::npos);
  CHECK(r.out.find(" bits/byte (") != std::string::npos);

  r = run_tool({"info", "--checkpoint", run}, dir.file("info"));
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("Muon+AdamW") != std::string::npos);
  CHECK(r.out.find("muon.momentum 0.95") != std::string::npos);

  // --resume without --recipe or --optimizer: the run's own (Muon, WSD) continues.
  r = run_tool(args(d, run, 6, {"--resume"}), dir.file("b"));
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(tapegrad::lm::list_step_checkpoints(run).back().first == 6);
  const auto resumed = nlohmann::json::parse(ToolProcess::slurp(run + "/config.json"));
  CHECK(resumed["train"]["optimizer"] == "muon");
  CHECK(resumed["train"]["schedule"] == "wsd");

  // Another optimizer on --resume: one line, exit 2, naming both kinds.
  r = run_tool(args(d, run, 8, {"--resume", "--optimizer", "adamw"}), dir.file("c"));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("Muon+AdamW") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);

  r = run_tool(args(d, dir.file("bad"), 4, {"--recipe", "speedrun"}), dir.file("d"));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--recipe must be classic or modern") != std::string::npos);
}
