// test_tool_train.cpp — the tool end to end, through the built binary: tokenize train → encode →
// train a micro model with evaluations and checkpoints → resume (bit for bit) → eval → info; the
// run directory's files (config.json, metrics.jsonl fields, loss.svg well-formed with one path per
// curve); resume after a real SIGTERM; kill -9 at random moments.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "data/token_file.h"
#include "lm/run_dir.h"
#include "optim/checkpoint.h"
#include "test_data_helpers.h"
#include "tool_corpus.h"
#include "tool_runner.h"
#include "xml_check.h"

using tapegrad::data::testing::ScratchDir;
using namespace tapegrad::testing;
namespace fs = std::filesystem;

namespace {

// A micro model small enough for a step to take a few milliseconds on one thread.
// The cosine ends at step 30 whatever --steps is, so that 20 steps + 10 resumed ones follow the same schedule.
std::vector<std::string> micro_args(const ToolData& d, const std::string& out, int steps, int checkpoint_every = 10) {
  return {"train", "--train", d.train_bin, "--val", d.val_bin, "--tokenizer", d.tokenizer, "--model", "micro",
          "--batch-size", "8", "--steps", std::to_string(steps), "--cosine-steps", "30", "--warmup-steps", "3",
          "--eval-every", "10", "--checkpoint-every", std::to_string(checkpoint_every), "--threads", "1", "--out", out};
}

// Same dtype, shape and bytes.
bool same_bits(const tapegrad::Tensor& a, const tapegrad::Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const tapegrad::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), size_t(ca.numel()) * tapegrad::dtype_size(ca.dtype())) == 0;
}

// Model tensors, optimizer state, step and RNG of two checkpoints are bitwise equal.
void require_same_checkpoint(const std::string& a, const std::string& b) {
  const auto ca = tapegrad::optim::read_checkpoint(a), cb = tapegrad::optim::read_checkpoint(b);
  REQUIRE(ca.step == cb.step);
  REQUIRE(ca.rng == cb.rng);
  REQUIRE(ca.model_state.size() == cb.model_state.size());
  for (const auto& [name, t] : ca.model_state) {
    INFO(name);
    REQUIRE(same_bits(t, cb.model_state.at(name)));
  }
  REQUIRE(ca.optimizer_state.size() == cb.optimizer_state.size());
  std::map<std::string, tapegrad::Tensor> sb(cb.optimizer_state.begin(), cb.optimizer_state.end());
  for (const auto& [name, t] : ca.optimizer_state) {
    INFO(name);
    REQUIRE(same_bits(t, sb.at(name)));
  }
}

}  // namespace

TEST_CASE("tool: tokenize, encode, train, checkpoint, resume exactly, eval, info", "[tool]") {
  ScratchDir dir("tool_e2e");
  const ToolData d = prepare_data(dir);
  const std::string run_a = dir.file("run_a"), run_b = dir.file("run_b");

  // 30 uninterrupted steps.
  ToolResult r = run_tool(micro_args(d, run_a, 30), dir.file("a"));
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("final validation loss") != std::string::npos);

  // The run directory.
  for (const char* f : {"config.json", "metrics.jsonl", "loss.svg", "tokenizer.json"}) CHECK(fs::exists(fs::path(run_a) / f));
  const auto ckpts = tapegrad::lm::list_step_checkpoints(run_a);
  REQUIRE(ckpts.size() == 3);  // steps 10, 20, 30 (keep_last 3)
  CHECK(ckpts.back().first == 30);
  CHECK(fs::exists(tapegrad::lm::best_checkpoint_path(run_a)));
  const auto config = nlohmann::json::parse(ToolProcess::slurp(run_a + "/config.json"));
  CHECK(config["model"]["vocab_size"] == 512);
  CHECK(config["model"]["d_model"] == 64);
  CHECK(config["train"]["steps"] == 30);
  CHECK(config["train"]["batch_size"] == 8);
  CHECK(config["run"]["train"] == d.train_bin);
  CHECK(config["run"].contains("tokenizer_fingerprint"));

  const auto records = read_jsonl(run_a + "/metrics.jsonl");
  int train_lines = 0, eval_lines = 0;
  for (const auto& j : records) {
    if (j["kind"] == "train") {
      ++train_lines;
      for (const char* k : {"step", "tokens", "wall_s", "loss", "lr", "grad_norm", "tokens_per_s"}) {
        INFO(k);
        CHECK(j[k].is_number());
      }
      CHECK(j["tokens"] == j["step"].get<int64_t>() * 8 * 64);
    } else {
      ++eval_lines;
      CHECK(j["kind"] == "eval");
      for (const char* k : {"step", "tokens", "wall_s", "val_loss", "val_perplexity", "val_tokens"}) {
        INFO(k);
        CHECK(j[k].is_number());
      }
      CHECK(std::abs(std::exp(j["val_loss"].get<double>()) - j["val_perplexity"].get<double>()) < 1e-9 * j["val_perplexity"].get<double>());
    }
  }
  CHECK(train_lines == 30);
  CHECK(eval_lines == 3);
  // It learns: the validation loss falls from one evaluation to the next, and ends well below the
  // first step's loss (≈ ln 512 = 6.24).
  std::vector<double> val_losses;
  for (const auto& j : records)
    if (j["kind"] == "eval") val_losses.push_back(j["val_loss"]);
  CHECK(std::is_sorted(val_losses.rbegin(), val_losses.rend()));
  CHECK(records.back()["val_loss"].get<double>() < records.front()["loss"].get<double>() - 0.3);

  std::map<std::string, int> elements;
  const std::string svg = ToolProcess::slurp(run_a + "/loss.svg");
  CHECK(xml_problem(svg, &elements) == "");
  CHECK(elements["svg"] == 1);
  CHECK(elements["path"] == 4);  // train and validation curves, against step and against wall time
  size_t train_paths = 0, val_paths = 0;
  for (size_t at = svg.find("<path class=\"train\""); at != std::string::npos; at = svg.find("<path class=\"train\"", at + 1)) ++train_paths;
  for (size_t at = svg.find("<path class=\"val\""); at != std::string::npos; at = svg.find("<path class=\"val\"", at + 1)) ++val_paths;
  CHECK(train_paths == 2);
  CHECK(val_paths == 2);

  // 20 steps, then resume to 30: the same losses, weights and optimizer state as the 30 steps.
  r = run_tool(micro_args(d, run_b, 20), dir.file("b1"));
  REQUIRE(r.exit_code == 0);
  auto resume_args = micro_args(d, run_b, 30);
  resume_args.push_back("--resume");
  r = run_tool(resume_args, dir.file("b2"));
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("resumed from") != std::string::npos);
  CHECK(losses(run_a + "/metrics.jsonl") == losses(run_b + "/metrics.jsonl"));
  require_same_checkpoint(ckpts.back().second, tapegrad::lm::step_checkpoint_path(run_b, 30));

  // eval on the validation tokens gives the last evaluation's loss; on the validation text, the same
  // (the run directory's tokenizer.json is used).
  const double last_val = records.back()["val_loss"].get<double>();
  for (std::vector<std::string> data : {std::vector<std::string>{"--data", d.val_bin}, {"--text", d.val_txt}}) {
    std::vector<std::string> args{"eval", "--checkpoint", ckpts.back().second, "--threads", "1"};
    args.insert(args.end(), data.begin(), data.end());
    r = run_tool(args, dir.file("eval"));
    INFO(r.out + r.err);
    REQUIRE(r.exit_code == 0);
    std::smatch m;
    REQUIRE(std::regex_search(r.out, m, std::regex("loss ([0-9.]+) nats/token  perplexity ([0-9.]+)  tokens evaluated ([0-9]+)")));
    CHECK(std::abs(std::stod(m[1]) - last_val) < 1e-4);
  }

  // generate: streams the prompt and its continuation; the same seed gives the same text; the
  // prompt may come from a file or stdin; tokens/s of prefill and decode on stderr.
  const std::vector<std::string> gen{"generate", "--checkpoint", ckpts.back().second, "--max-tokens", "40",
                                     "--seed", "3", "--threads", "1", "--no-stop"};
  auto with = [](std::vector<std::string> a, std::vector<std::string> more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  const ToolResult g1 = run_tool(with(gen, {"--prompt", "Once upon a time"}), dir.file("gen1"));
  INFO(g1.out + g1.err);
  REQUIRE(g1.exit_code == 0);
  CHECK(g1.out.rfind("Once upon a time", 0) == 0);
  CHECK(g1.out.size() > std::string("Once upon a time").size() + 40);  // 40 tokens of at least one byte
  CHECK(std::regex_search(g1.err, std::regex("prefill: 4 tokens in .* decode: 39 tokens in")));
  CHECK(run_tool(with(gen, {"--prompt", "Once upon a time"}), dir.file("gen2")).out == g1.out);
  CHECK(run_tool(with(gen, {"--prompt", "Once upon a time", "--seed", "4"}), dir.file("gen3")).out != g1.out);
  tapegrad::data::testing::write_all(dir.file("prompt.txt"), "Once upon a time");
  CHECK(run_tool(with(gen, {"--prompt-file", dir.file("prompt.txt")}), dir.file("gen4")).out == g1.out);
  CHECK(run_tool(gen, dir.file("gen5"), ToolOptions{-1, dir.file("prompt.txt")}).out == g1.out);

  r = run_tool({"info", "--checkpoint", ckpts.back().second}, dir.file("info"));
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("step 30") != std::string::npos);
  CHECK(r.out.find("d_model = 64") != std::string::npos);
  CHECK(r.out.find("optimizer AdamW") != std::string::npos);
  CHECK(r.out.find("tokenizer: " + run_a + "/tokenizer.json") != std::string::npos);
}

TEST_CASE("tool: SIGTERM and Ctrl-C finish the step, checkpoint, exit 143 or 130, and the resumed run is exact", "[tool]") {
  ScratchDir dir("tool_signal");
  const ToolData d = prepare_data(dir);
  const std::string ref = dir.file("ref");
  // Checkpoints only at the end or on a stop.
  auto args = [&](const std::string& out) { return micro_args(d, out, 200, 1000); };
  REQUIRE(run_tool(args(ref), dir.file("ref")).exit_code == 0);

  for (int sig : {SIGTERM, SIGINT}) {
    const std::string out = dir.file(sig == SIGTERM ? "term" : "int");
    ToolProcess p(args(out), out);
    // Wait until a few steps are logged, then signal.
    for (int i = 0; i < 2000 && lines_of(ToolProcess::slurp(out + "/metrics.jsonl")).size() < 5; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    p.send(sig);
    ToolResult r = p.wait();
    INFO(r.out + r.err);
    const auto newest = tapegrad::lm::newest_checkpoint(out);
    if (r.exit_code == 0) {
      WARN("the run finished before the signal arrived; nothing to check");
      continue;
    }
    REQUIRE(r.exit_code == 128 + sig);
    CHECK(r.err.find("resume with: tapegrad train") != std::string::npos);
    REQUIRE(newest.has_value());
    const int64_t stopped_at = tapegrad::optim::read_checkpoint(*newest).step;
    CHECK(stopped_at >= 5);
    CHECK(stopped_at < 200);
    auto resume = args(out);
    resume.push_back("--resume");
    r = run_tool(resume, out + "_resume");
    INFO(r.out + r.err);
    REQUIRE(r.exit_code == 0);
    require_same_checkpoint(tapegrad::lm::step_checkpoint_path(ref, 200), tapegrad::lm::step_checkpoint_path(out, 200));
    CHECK(losses(ref + "/metrics.jsonl") == losses(out + "/metrics.jsonl"));
  }
}

TEST_CASE("tool: kill -9 at random moments, 100 times: the newest checkpoint always loads and resumes", "[tool]") {
  ScratchDir dir("tool_kill");
  // Byte-level tokens of the corpus (vocab 256): no tokenizer needed, the smallest possible model.
  const std::string corpus =
      tapegrad::data::testing::read_all(std::string(TAPEGRAD_SOURCE_DIR) + "/corpus/tinystories_head.txt").substr(0, 50000);
  std::vector<uint32_t> ids(corpus.begin(), corpus.end());
  for (uint32_t& id : ids) id &= 0xff;
  tapegrad::data::write_token_file(dir.file("bytes.bin"), ids, 256);
  const std::string out = dir.file("run");
  const std::vector<std::string> base{"train", "--train", dir.file("bytes.bin"), "--context", "16", "--d-model", "32",
                                      "--layers", "1", "--heads", "2", "--d-ff", "64", "--batch-size", "4",
                                      "--steps", "100000", "--checkpoint-every", "1", "--keep-last", "2",
                                      "--threads", "1", "--out", out};
  // Calibration: how long until the first checkpoint exists on this machine (start-up included)?
  // The kills then land uniformly in [0, 2·that]: before, during and after checkpoint writes.
  int64_t first_checkpoint_us = 0;
  {
    ToolProcess p(base, dir.file("calibrate"));
    const auto t0 = std::chrono::steady_clock::now();
    while (!tapegrad::lm::newest_checkpoint(out) &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    first_checkpoint_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    p.send(SIGKILL);
    REQUIRE(p.wait().signal == SIGKILL);
    REQUIRE(tapegrad::lm::newest_checkpoint(out));
  }
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int64_t> delay_us(0, 2 * first_checkpoint_us);
  int64_t last_step = tapegrad::optim::read_checkpoint(*tapegrad::lm::newest_checkpoint(out)).step;
  for (int i = 0; i < 100; ++i) {
    auto args = base;
    if (tapegrad::lm::newest_checkpoint(out)) args.push_back("--resume");
    ToolProcess p(args, dir.file("kill"));
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    p.send(SIGKILL);
    const ToolResult r = p.wait();
    INFO("round " << i << ": " << r.err);
    REQUIRE(r.signal == SIGKILL);  // killed, never an error exit
    if (const auto newest = tapegrad::lm::newest_checkpoint(out)) {
      const auto ck = tapegrad::optim::read_checkpoint(*newest);  // complete and uncorrupted (checksum)
      CHECK(ck.step >= last_step);
      last_step = ck.step;
    }
  }
  INFO("first checkpoint after " << first_checkpoint_us << " µs");
  CHECK(last_step > 1);
  // And it resumes: 3 more steps from the newest checkpoint.
  auto args = base;
  *(std::find(args.begin(), args.end(), "--steps") + 1) = std::to_string(last_step + 3);
  args.push_back("--resume");
  const ToolResult r = run_tool(args, dir.file("final"));
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(tapegrad::optim::read_checkpoint(*tapegrad::lm::newest_checkpoint(out)).step == last_step + 3);
}
