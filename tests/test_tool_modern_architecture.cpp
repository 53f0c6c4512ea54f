// test_tool_modern_architecture.cpp — the modern architecture options through the tool: `train --qk-norm true
// --ffn relu2 …` records them in config.json and the checkpoints, `info` shows them, a resumed run is bit for bit
// the uninterrupted one, eval / generate / quantize (and generate from the int8 file) run the same model, both
// exports refuse it in one line naming the options, --init-from refuses a contradicting option, and
// `--recipe modern` gives a new model QK-norm.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "lm/run_dir.h"
#include "optim/checkpoint.h"
#include "test_data_helpers.h"
#include "tool_corpus.h"
#include "tool_runner.h"

using tapegrad::data::testing::ScratchDir;
using namespace tapegrad::testing;

namespace {

const std::vector<std::string> kModern{"--qk-norm",   "true", "--ffn",        "relu2", "--norm-gain", "false",
                                       "--embed-norm", "true", "--logit-softcap", "20", "--zero-init-projections",
                                       "true"};

std::vector<std::string> args(const ToolData& d, const std::string& out, int steps, std::vector<std::string> more) {
  std::vector<std::string> a{"train", "--train", d.train_bin, "--val", d.val_bin, "--tokenizer", d.tokenizer,
                             "--model", "micro", "--batch-size", "4", "--steps", std::to_string(steps),
                             "--warmup-steps", "1", "--cosine-steps", "6", "--checkpoint-every", "3", "--threads", "1",
                             "--out", out};  // (the cosine fixed at 6 steps: a 3-step run is the first half of a 6-step one)
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

bool same_bits(const tapegrad::Tensor& a, const tapegrad::Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const tapegrad::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), size_t(ca.numel()) * tapegrad::dtype_size(ca.dtype())) == 0;
}

// The error lines of stderr (a run directory given as --checkpoint adds a line naming the file it took).
size_t error_lines(const std::string& err) {
  size_t n = 0;
  for (size_t at = err.find("tapegrad:"); at != std::string::npos; at = err.find("tapegrad:", at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("tool: the modern architecture options train, resume exactly, generate, quantize and refuse export",
          "[tool][modern]") {
  ScratchDir dir("tool_modern_arch");
  const ToolData d = prepare_data(dir);
  const std::string whole = dir.file("whole"), split = dir.file("split");
  ToolResult r = run_tool(args(d, whole, 6, kModern), dir.file("a"));
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  const auto config = nlohmann::json::parse(ToolProcess::slurp(whole + "/config.json"));
  CHECK(config["model"]["qk_norm"] == true);
  CHECK(config["model"]["ffn"] == "relu2");
  CHECK(config["model"]["norm_gain"] == false);
  CHECK(config["model"]["embed_norm"] == true);
  CHECK(config["model"]["logit_softcap"] == 20);
  CHECK(config["model"]["zero_init_projections"] == true);
  auto newest = [](const std::string& run) { return tapegrad::optim::read_checkpoint(*tapegrad::lm::newest_checkpoint(run)); };
  const auto ck = newest(whole);
  CHECK(ck.model_state.count("layers.0.attn.q_norm.weight") == 0);  // no gains
  CHECK(ck.model_state.count("layers.0.ffn.w3.weight") == 0);       // ReLU²
  CHECK(ck.config.at("qk_norm") == "true");

  // Interrupted at step 3 and resumed: the same bits as the uninterrupted run.
  REQUIRE(run_tool(args(d, split, 3, kModern), dir.file("b")).exit_code == 0);
  std::vector<std::string> resume = kModern;  // the same command with --resume, as the tool's own hint says
  resume.push_back("--resume");
  r = run_tool(args(d, split, 6, resume), dir.file("c"));
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  const auto a = newest(whole), b = newest(split);
  REQUIRE(a.step == 6);
  REQUIRE(b.step == 6);
  for (const auto& [name, t] : a.model_state) {
    INFO(name);
    CHECK(same_bits(t, b.model_state.at(name)));
  }

  r = run_tool({"info", "--checkpoint", whole}, dir.file("info"));
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("qk_norm = true") != std::string::npos);
  CHECK(r.out.find("ffn = relu2") != std::string::npos);

  r = run_tool({"eval", "--checkpoint", whole, "--data", d.val_bin, "--threads", "1"}, dir.file("eval"));
  CHECK(r.exit_code == 0);
  r = run_tool({"generate", "--checkpoint", whole, "--prompt", "Once", "--max-tokens", "20", "--seed", "1",
                "--threads", "1"},
               dir.file("gen"));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("Once", 0) == 0);
  const std::string q = dir.file("q");
  r = run_tool({"quantize", whole, "--out", q}, dir.file("quant"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  r = run_tool({"generate", "--checkpoint", q, "--prompt", "Once", "--max-tokens", "20", "--seed", "1", "--threads",
                "1"},
               dir.file("gen8"));
  INFO(r.err);
  CHECK(r.exit_code == 0);

  // Exports: one line, exit 2, naming the options; nothing written.
  r = run_tool({"export", "llama2c", whole, "--out", dir.file("m.bin")}, dir.file("e1"));
  CHECK(r.exit_code == 2);
  CHECK(error_lines(r.err) == 1);
  CHECK(r.err.find("--qk-norm true") != std::string::npos);
  CHECK(!std::filesystem::exists(dir.file("m.bin")));
  r = run_tool({"export", "hf", whole, "--out", dir.file("hf")}, dir.file("e2"));
  CHECK(r.exit_code == 2);
  CHECK(error_lines(r.err) == 1);
  CHECK(r.err.find("--ffn relu2") != std::string::npos);

  // --init-from keeps the checkpoint's architecture: a contradicting option is refused, naming both.
  r = run_tool({"train", "--train", d.train_bin, "--val", d.val_bin, "--tokenizer", d.tokenizer, "--steps", "2",
                "--init-from", whole, "--qk-norm", "false", "--out", dir.file("ft")},
               dir.file("f"));
  CHECK(r.exit_code == 2);
  CHECK(error_lines(r.err) == 1);
  CHECK(r.err.find("--qk-norm") != std::string::npos);
  r = run_tool(args(d, dir.file("bad"), 2, {"--ffn", "gelu"}), dir.file("g"));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("swiglu or relu2") != std::string::npos);
  r = run_tool(args(d, dir.file("bad2"), 2, {"--logit-softcap", "-1"}), dir.file("h"));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--logit-softcap") != std::string::npos);
}

TEST_CASE("tool: --recipe modern gives a new model QK-norm, a flag overrides it", "[tool][modern]") {
  ScratchDir dir("tool_modern_recipe");
  const ToolData d = prepare_data(dir);
  ToolResult r = run_tool(args(d, dir.file("m"), 2, {"--recipe", "modern"}), dir.file("a"));
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  auto config = nlohmann::json::parse(ToolProcess::slurp(dir.file("m") + "/config.json"));
  CHECK(config["model"]["qk_norm"] == true);
  r = run_tool(args(d, dir.file("n"), 2, {"--recipe", "modern", "--qk-norm", "false"}), dir.file("b"));
  REQUIRE(r.exit_code == 0);
  config = nlohmann::json::parse(ToolProcess::slurp(dir.file("n") + "/config.json"));
  CHECK(!config["model"].contains("qk_norm"));
  r = run_tool(args(d, dir.file("c"), 2, {}), dir.file("c"));
  REQUIRE(r.exit_code == 0);
  config = nlohmann::json::parse(ToolProcess::slurp(dir.file("c") + "/config.json"));
  CHECK(!config["model"].contains("qk_norm"));  // classic: the Llama architecture
}
