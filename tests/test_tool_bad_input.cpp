// test_tool_bad_input.cpp — bad input to `tapegrad train/eval/info` gets ONE clear stderr line and
// a non-zero exit, and writes nothing half-way: unknown or malformed flags, missing files, token ids
// beyond the vocabulary, a checkpoint of another config or tokenizer, a context longer than the
// model's, heads not dividing d_model, an --out that cannot be written, a file-size limit hit while
// checkpointing (the previous checkpoint stays intact), config files.
#include <filesystem>
#include <fstream>

#include "data/token_file.h"
#include "lm/run_dir.h"
#include "optim/checkpoint.h"
#include "test_data_helpers.h"
#include "tool_runner.h"

using tapegrad::data::testing::ScratchDir;
using tapegrad::data::testing::write_all;
using namespace tapegrad::testing;
namespace fs = std::filesystem;

namespace {

struct Fixture {
  ScratchDir dir{"tool_bad_input"};
  std::string text, tok512, tok300, train_bin, run;
  Fixture() {
    const std::string corpus =
        tapegrad::data::testing::read_all(std::string(TAPEGRAD_SOURCE_DIR) + "/corpus/tinystories_head.txt");
    text = dir.file("stories.txt");
    write_all(text, corpus.substr(0, corpus.find("<|endoftext|>\n", 60000) + 14));
    tok512 = dir.file("tok512");
    tok300 = dir.file("tok300");
    train_bin = dir.file("train.bin");
    run = dir.file("run");
    REQUIRE(tool({"tokenize", "train", "--input", text, "--vocab-size", "512", "--out", tok512}).exit_code == 0);
    REQUIRE(tool({"tokenize", "train", "--input", text, "--vocab-size", "300", "--out", tok300}).exit_code == 0);
    REQUIRE(tool({"tokenize", "encode", "--tokenizer", tok512, "--input", text, "--out", train_bin}).exit_code == 0);
  }
  ToolResult tool(const std::vector<std::string>& args, ToolOptions opts = {}) const {
    return run_tool(args, dir.file("log"), opts);
  }
  // A micro-sized training command on the 512-token data; `extra` appended.
  std::vector<std::string> train(const std::string& out, int steps, std::vector<std::string> extra = {}) const {
    std::vector<std::string> a{"train", "--text", text, "--tokenizer", tok512, "--context", "32", "--d-model", "32",
                               "--layers", "1", "--heads", "2", "--batch-size", "4", "--steps", std::to_string(steps),
                               "--checkpoint-every", "5", "--threads", "1", "--out", out};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

// Fails unless the tool exited with a non-zero code (not a signal) and printed exactly one stderr
// line, "tapegrad: ...", containing `what`.
void require_clean_error(const ToolResult& r, const std::string& what) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.signal == 0);
  REQUIRE(r.exit_code != 0);
  const auto lines = lines_of(r.err);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("tapegrad: ", 0) == 0);
  CHECK(lines[0].find(what) != std::string::npos);
}

bool has_temp_files(const std::string& run) {
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(run, ec))
    if (e.path().filename().string().find(".tmp") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("tool: bad flags, files and model shapes are refused before anything is written", "[tool]") {
  Fixture f;
  const std::string out = f.dir.file("never");
  require_clean_error(f.tool(f.train(out, 5, {"--bogus"})), "unrecognised option '--bogus'");
  require_clean_error(f.tool(f.train(out, 5, {"--lr", "fast"})), "'--lr' is invalid");
  require_clean_error(f.tool({"train", "--train", f.dir.file("missing.bin"), "--out", out}), "missing.bin");
  require_clean_error(f.tool({"train", "--train", f.dir.path.string(), "--out", out}), f.dir.path.string());
  require_clean_error(f.tool(f.train(out, 5, {"--d-model", "30", "--heads", "4"})), "");  // d-model given twice
  require_clean_error(f.tool({"train", "--text", f.text, "--tokenizer", f.tok512, "--d-model", "30", "--heads", "4",
                              "--out", out}),
                      "--heads 4 must divide --d-model 30");
  require_clean_error(f.tool({"train", "--text", f.text, "--out", out}), "--text needs --tokenizer");
  require_clean_error(f.tool({"train", "--text", f.text, "--tokenizer", f.dir.file("no_tokenizer"), "--out", out}),
                      "no_tokenizer");
  require_clean_error(f.tool({"train", "--text", f.text, "--tokenizer", f.tok512}), "--out DIR is required");
  require_clean_error(f.tool(f.train(out, 5, {"--resume"})), "holds no checkpoint");
  CHECK_FALSE(fs::exists(f.dir.file("never") + "/checkpoints/best.safetensors"));
  CHECK(tapegrad::lm::list_step_checkpoints(out).empty());

  // A text too short to hold anything out (one document is held out by tokens: tests/test_tool_first_hour.cpp).
  write_all(f.dir.file("one.txt"), "J");
  require_clean_error(f.tool({"train", "--text", f.dir.file("one.txt"), "--tokenizer", f.tok512, "--out", out}),
                      "too few to hold out a validation part");

  // A token file whose ids exceed the tokenizer's vocabulary (300 tokens; the file holds ids up to 511).
  require_clean_error(f.tool({"train", "--train", f.train_bin, "--tokenizer", f.tok300, "--context", "32",
                              "--d-model", "32", "--layers", "1", "--heads", "2", "--out", out}),
                      "outside the model's vocabulary of 300");

  // A model vocabulary other than the tokenizer's: generate would refuse the checkpoint, so train does.
  require_clean_error(f.tool({"train", "--text", f.text, "--tokenizer", f.tok300, "--vocab-size", "320", "--out", out}),
                      "the tokenizer has 300 tokens but the model's vocabulary is 320");

  // An --out that cannot be created (its parent is a file).
  require_clean_error(f.tool(f.train(f.text + "/run", 5)), "cannot create the run directory");
}

TEST_CASE("tool: another config, another tokenizer, a longer context, a full disk", "[tool]") {
  Fixture f;
  ToolResult r = f.tool(f.train(f.run, 5));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string ckpt = tapegrad::lm::step_checkpoint_path(f.run, 5);
  REQUIRE(fs::exists(ckpt));
  const auto before = fs::last_write_time(ckpt);

  // The directory already holds a run: refused without --resume.
  require_clean_error(f.tool(f.train(f.run, 10)), "already holds checkpoints");
  // Resuming with another model config: every difference is named, nothing is changed.
  {
    auto a = f.train(f.run, 10, {"--resume"});
    *(std::find(a.begin(), a.end(), "--d-model") + 1) = "64";
    require_clean_error(f.tool(a), "d_model 32 (file) vs 64 (expected)");
  }
  // Resuming with another tokenizer: the checkpoint's recorded fingerprint says so.
  {
    auto a = f.train(f.run, 10, {"--resume", "--vocab-size", "512"});
    *(std::find(a.begin(), a.end(), "--tokenizer") + 1) = f.tok300;
    require_clean_error(f.tool(a), "is not the one checkpoint");
  }
  CHECK(fs::last_write_time(ckpt) == before);
  CHECK(tapegrad::lm::newest_checkpoint(f.run) == ckpt);

  // eval: another tokenizer, a longer context than the model's, a token file beyond the vocabulary.
  require_clean_error(f.tool({"eval", "--checkpoint", ckpt, "--text", f.text, "--tokenizer", f.tok300}),
                      "is not the one checkpoint");
  require_clean_error(f.tool({"eval", "--checkpoint", ckpt, "--text", f.text, "--context", "64"}),
                      "--context 64 is longer than the model's context length 32");
  std::vector<uint32_t> big(100, 700);
  tapegrad::data::write_token_file(f.dir.file("big.bin"), big, 1000);
  require_clean_error(f.tool({"eval", "--checkpoint", ckpt, "--data", f.dir.file("big.bin")}), "token id 700");
  require_clean_error(f.tool({"eval", "--checkpoint", f.text, "--data", f.train_bin}), f.text);

  // generate: bad sampling options, past the context with --no-sliding, another tokenizer — nothing printed.
  const std::vector<std::string> gen{"generate", "--checkpoint", ckpt, "--prompt", "Once upon a time"};
  auto gen_with = [&](std::vector<std::string> more) {
    auto a = gen;
    a.insert(a.end(), more.begin(), more.end());
    return f.tool(a);
  };
  require_clean_error(gen_with({"--top-p", "1.5"}), "--top-p must be in (0, 1]");
  require_clean_error(gen_with({"--top-k", "-1"}), "--top-k");
  require_clean_error(gen_with({"--temperature", "-0.5"}), "--temperature");
  require_clean_error(gen_with({"--max-tokens", "40", "--no-sliding"}), "more than the model's context of 32");
  require_clean_error(gen_with({"--tokenizer", f.tok300}), "is not the one checkpoint");
  require_clean_error(gen_with({"--cuda-graph", "maybe"}), "--cuda-graph must be on or off, but is 'maybe'");
  CHECK(gen_with({"--max-tokens", "40", "--no-sliding"}).out.empty());
  require_clean_error(f.tool({"info", "--checkpoint", f.dir.file("nope.safetensors")}), "nope.safetensors");

  // The disk fills up (RLIMIT_FSIZE 64 KiB, a checkpoint is larger) while checkpointing at step 10
  // (best.safetensors after the final evaluation comes first): an error naming the file, and the
  // step-5 checkpoint is still the newest, intact, with no temp file left.
  r = f.tool(f.train(f.run, 10, {"--resume"}), ToolOptions{64 * 1024, ""});
  require_clean_error(r, "File too large");
  CHECK(r.err.find(".safetensors") != std::string::npos);
  CHECK(tapegrad::lm::newest_checkpoint(f.run) == ckpt);
  CHECK(tapegrad::optim::read_checkpoint(ckpt).step == 5);
  CHECK_FALSE(has_temp_files(f.run));
  // And the run continues from it once there is room.
  r = f.tool(f.train(f.run, 10, {"--resume"}));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(tapegrad::optim::read_checkpoint(tapegrad::lm::step_checkpoint_path(f.run, 10)).step == 10);
}

TEST_CASE("tool: options from a config file, flags override it, unknown keys are refused", "[tool]") {
  Fixture f;
  write_all(f.dir.file("train.ini"), "# a training config\ntext = " + f.text + "\ntokenizer = " + f.tok512 +
                                         "\ncontext = 32\nd-model = 32\nlayers = 1\nheads = 2\nbatch-size = 4\n"
                                         "steps = 7\nthreads = 1\n");
  ToolResult r = f.tool({"train", "--config", f.dir.file("train.ini"), "--steps", "3", "--out", f.run});
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(tapegrad::optim::read_checkpoint(tapegrad::lm::step_checkpoint_path(f.run, 3)).step == 3);  // the flag won
  CHECK(tapegrad::optim::read_checkpoint(tapegrad::lm::step_checkpoint_path(f.run, 3)).config.at("d_model") == "32");
  write_all(f.dir.file("bad.ini"), "steps = 3\nlearning-rate = 0.1\n");
  require_clean_error(f.tool({"train", "--config", f.dir.file("bad.ini"), "--out", f.dir.file("x")}), "bad.ini");
  require_clean_error(f.tool({"train", "--config", f.dir.file("missing.ini"), "--out", f.dir.file("x")}),
                      "missing.ini");
}
