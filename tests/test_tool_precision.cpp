// test_tool_precision.cpp — `--precision bf16` through the built tool: training in bf16 tracks the
// float32 run of the same model, data and seed (validation loss within 1 % relative at every evaluation,
// as issue 23 asks of the main job: this is its shape — 128-wide, 4 layers, context 128 — for fewer
// steps); the precision is recorded in config.json and the checkpoint; eval and generate take the flag;
// a bad value is one stderr line.
#include <cmath>
#include <filesystem>

#include "optim/checkpoint.h"
#include "sanitized.h"
#include "tool_corpus.h"

using tapegrad::data::testing::ScratchDir;
using namespace tapegrad::testing;

namespace {

// The main job's model (scripts/run.sh: d_model 128, 4 layers, context 128, batch 16, lr 3e-3) on the test
// corpus for 80 steps (~1 minute for both runs on one thread); under a sanitizer a 64-wide one (same checks).
// One thread: two OpenMP threads on a loaded 2-core machine spend most of bf16's extra small kernels
// waiting at barriers.
std::vector<std::string> train_args(const ToolData& d, const std::string& out, const std::string& precision) {
  const char* width = kSanitized ? "64" : "128";
  const char* layers = kSanitized ? "2" : "4";
  const char* context = kSanitized ? "64" : "128";
  const char* steps = kSanitized ? "40" : "80";
  const char* every = kSanitized ? "10" : "20";
  return {"train", "--train", d.train_bin, "--val", d.val_bin, "--tokenizer", d.tokenizer, "--d-model", width,
          "--layers", layers, "--heads", "4", "--context", context, "--batch-size", "16", "--steps", steps,
          "--lr", "3e-3", "--warmup-steps", "10", "--eval-every", every, "--threads", "1", "--precision", precision,
          "--out", out};
}

// The validation losses of a run, in step order.
std::vector<double> val_losses(const std::string& run) {
  std::vector<double> out;
  for (const auto& [kind, step, loss] : losses(run + "/metrics.jsonl"))
    if (kind == "eval") out.push_back(loss);
  return out;
}

}  // namespace

TEST_CASE("tool: train --precision bf16 tracks float32 within 1 % at every evaluation, eval and generate", "[tool]") {
  ScratchDir dir("tool_precision");
  const ToolData d = prepare_data(dir);
  const std::string run32 = dir.file("fp32"), run16 = dir.file("bf16");
  for (const auto& [run, precision] : {std::pair{run32, "fp32"}, std::pair{run16, "bf16"}}) {
    const ToolResult r = run_tool(train_args(d, run, precision), dir.file(precision));
    INFO(r.out + r.err);
    REQUIRE(r.exit_code == 0);
  }
  const std::vector<double> a = val_losses(run32), b = val_losses(run16);
  REQUIRE(a.size() >= 3);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("evaluation " << i << ": fp32 " << a[i] << ", bf16 " << b[i]);
    CHECK(std::abs(b[i] - a[i]) / a[i] < 0.01);
  }
  CHECK(b.back() < b.front() - 0.5);  // it learned (not two equally stuck runs)

  // Recorded where a run's settings live.
  CHECK(ToolProcess::slurp(run16 + "/config.json").find("\"precision\": \"bf16\"") != std::string::npos);
  const auto ck = tapegrad::optim::read_checkpoint(run16 + "/checkpoints/best.safetensors");
  CHECK(ck.extra.at("train.precision") == "bf16");

  // eval in bf16 gives the float32 eval's loss within 1 %; generate --precision bf16 writes text.
  ToolResult e32 = run_tool({"eval", "--checkpoint", run16, "--data", d.val_bin}, dir.file("e32"));
  ToolResult e16 = run_tool({"eval", "--checkpoint", run16, "--data", d.val_bin, "--precision", "bf16"}, dir.file("e16"));
  INFO(e32.out + e32.err + e16.out + e16.err);
  REQUIRE(e32.exit_code == 0);
  REQUIRE(e16.exit_code == 0);
  const auto loss_of = [](const std::string& out) {
    const size_t at = out.find("loss ");
    REQUIRE(at != std::string::npos);
    return std::stod(out.substr(at + 5));
  };
  CHECK(std::abs(loss_of(e16.out) - loss_of(e32.out)) / loss_of(e32.out) < 0.01);
  ToolResult g = run_tool({"generate", "--checkpoint", run16, "--prompt", "Once upon a time", "--max-tokens", "20",
                           "--precision", "bf16"},
                          dir.file("gen"));
  INFO(g.err);
  REQUIRE(g.exit_code == 0);
  CHECK(g.out.size() > std::string("Once upon a time").size());

  ToolResult bad = run_tool({"eval", "--checkpoint", run16, "--data", d.val_bin, "--precision", "fp16"}, dir.file("bad"));
  CHECK(bad.exit_code != 0);
  CHECK(lines_of(bad.err).size() == 1);
  CHECK(bad.err.find("--precision: 'fp16' is not a precision") != std::string::npos);
}
