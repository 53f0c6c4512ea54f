// test_tool_gaps.cpp — bad input to the `tapegrad` tool that docs/reliability.md listed as untested:
// each case checks the exit status (2; 3 for divergence), ONE stderr line `tapegrad: …` naming the
// flag, file or value at fault, and that nothing is left behind. Covered: tokenize train/encode
// inputs, special tokens and outputs; unknown commands, formats, subcommands; missing required flags
// and positionals; --device, --threads, --config; train's data flags, model shapes and schedule flags;
// --text / --prompt-file naming a directory or a missing file; eval's data flags; demo/dot; import hf
// with a bad tokenizer.json, export hf to an --out that cannot be made; generate's prompt sources and
// tokenizers; a refused --resume leaving no run directory; a second Ctrl-C; divergence (exit 3).
// Models are tiny (16 wide, one layer) and runs take a few steps, so the file runs in seconds.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "data/token_file.h"
#include "kernels/backend.h"
#include "lm/model_io.h"
#include "lm/run_dir.h"
#include "nn/transformer_lm.h"
#include "optim/checkpoint.h"
#include "test_data_helpers.h"
#include "tool_runner.h"

using tapegrad::data::testing::ScratchDir;
using tapegrad::data::testing::write_all;
using namespace tapegrad::testing;
namespace fs = std::filesystem;

namespace {

// Fails unless the tool exited with `code` (not by a signal) and printed exactly one stderr line,
// "tapegrad: ...", containing `what`.
void require_error(const ToolResult& r, const std::string& what, int code = 2) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.signal == 0);
  CHECK(r.exit_code == code);
  const auto lines = lines_of(r.err);
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::StartsWith("tapegrad: ") && Catch::Contains(what));
}

bool has_temp_files(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.path().filename().string().find(".tmp") != std::string::npos) return true;
  return false;
}

// A scratch directory and the inputs the cases need, each made on first use.
struct Gaps {
  ScratchDir dir;
  explicit Gaps(const std::string& tag) : dir("tool_gaps_" + tag) {}

  ToolResult tool(const std::vector<std::string>& args, ToolOptions opts = {}) const {
    return run_tool(args, dir.file("log"), opts);
  }
  // About 20 KB of whole stories from the repository's corpus, separated by <|endoftext|>.
  const std::string& text() {
    if (text_.empty()) {
      const std::string corpus =
          tapegrad::data::testing::read_all(std::string(TAPEGRAD_SOURCE_DIR) + "/corpus/tinystories_head.txt");
      text_ = dir.file("stories.txt");
      write_all(text_, corpus.substr(0, corpus.find("<|endoftext|>\n", 20000) + 14));
    }
    return text_;
  }
  // A 300-token byte-level BPE trained on text() (tokenizer.json, vocab.json, merges.txt).
  const std::string& tokenizer() {
    if (tokenizer_.empty()) {
      const std::string out = dir.file("tok300");
      const ToolResult r = tool({"tokenize", "train", "--input", text(), "--vocab-size", "300", "--threads", "1",
                                 "--out", out});
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      tokenizer_ = out;
    }
    return tokenizer_;
  }
  // The bytes of text() as a token file of vocabulary 256: training data without a tokenizer.
  const std::string& byte_tokens() {
    if (bytes_.empty()) {
      const std::string t = tapegrad::data::testing::read_all(text());
      std::vector<uint32_t> ids(t.begin(), t.end());
      for (uint32_t& id : ids) id &= 0xff;
      bytes_ = dir.file("bytes.bin");
      tapegrad::data::write_token_file(bytes_, ids, 256);
    }
    return bytes_;
  }
  // A tiny untrained model saved as `import` saves one: RUN/checkpoints/step_00000000.safetensors,
  // no trainer extras, no tokenizer next to it.
  std::string model_checkpoint(const std::string& run, int64_t vocab, const tapegrad::optim::ConfigMap& extra = {}) {
    tapegrad::nn::TransformerLMConfig c;
    c.vocab_size = vocab, c.context_length = 16, c.d_model = 16, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 2;
    c.d_ff = 32;
    tapegrad::Generator gen(5);
    tapegrad::nn::TransformerLM model(c, &gen);
    fs::create_directories(tapegrad::lm::checkpoints_dir(dir.file(run)));
    const std::string path = tapegrad::lm::step_checkpoint_path(dir.file(run), 0);
    tapegrad::lm::save_model_checkpoint(model, path, extra);
    return path;
  }
  // A tiny training run on byte_tokens(); `extra` appended.
  std::vector<std::string> train(const std::string& out, int steps, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> a{"train", "--train", byte_tokens(), "--context", "16", "--d-model", "16", "--layers", "1",
                               "--heads", "2", "--d-ff", "32", "--batch-size", "4", "--steps", std::to_string(steps),
                               "--threads", "1", "--out", out};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

 private:
  std::string text_, tokenizer_, bytes_;
};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// `a` with the value after `flag` replaced by `value`.
std::vector<std::string> replaced(std::vector<std::string> a, const std::string& flag, const std::string& value) {
  const auto at = std::find(a.begin(), a.end(), flag);
  REQUIRE(at != a.end());
  *(at + 1) = value;
  return a;
}

// The signals this process catches, from /proc/PID/status (SigCgt), or 0 when it cannot be read.
uint64_t caught_signals(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("SigCgt:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  return 0;
}

bool catches(pid_t pid, int sig) { return (caught_signals(pid) >> (sig - 1)) & 1; }

// True once the child has become the tool (before its exec it is a copy of this test process, with
// Catch's own signal handlers).
bool is_tool(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string argv0;
  std::getline(f, argv0, '\0');
  return argv0 == TAPEGRAD_TOOL_PATH;
}

// Polls `done` every millisecond for up to 60 s; true when it became true.
template <class F>
bool wait_until(F done) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!done()) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

TEST_CASE("tool: tokenize train refuses a directory or empty input, bad special tokens, an unusable --out", "[tool]") {
  Gaps g("tokenize_train");
  const std::string out = g.dir.file("tok");
  auto train = [&](const std::string& input, std::vector<std::string> more = {}) {
    return g.tool(with({"tokenize", "train", "--input", input, "--vocab-size", "300", "--threads", "1"}, more));
  };
  // A directory without a text file as --input; nothing is made.
  require_error(train(g.dir.path.string(), {"--out", out}), "--input: the directory " + g.dir.path.string() + " holds no text file");
  CHECK_FALSE(fs::exists(out));
  // An empty file: the error names it, and the --out directory the command made is removed again.
  write_all(g.dir.file("empty.txt"), "");
  require_error(train(g.dir.file("empty.txt"), {"--out", out}),
                "BPE training: " + g.dir.file("empty.txt") + " is empty, so none of the 43 requested merges is possible");
  CHECK_FALSE(fs::exists(out));
  // ... but a directory that was there before stays, with what it held.
  fs::create_directories(out);
  write_all(out + "/notes.txt", "mine");
  require_error(train(g.dir.file("empty.txt"), {"--out", out}), "is empty");
  CHECK(tapegrad::data::testing::read_all(out + "/notes.txt") == "mine");
  CHECK_FALSE(fs::exists(out + "/tokenizer.json"));
  fs::remove_all(out);

  // Special tokens: an empty one, "none" with another.
  require_error(train(g.text(), {"--special", "", "--out", out}), "--special: a special token cannot be empty");
  require_error(train(g.text(), {"--special", "none", "--special", "<s>", "--out", out}),
                "--special none cannot be combined with other special tokens");
  CHECK_FALSE(fs::exists(out));

  // --out is a file: refused, the file untouched.
  write_all(g.dir.file("a_file"), "keep");
  require_error(train(g.text(), {"--out", g.dir.file("a_file")}), "--out " + g.dir.file("a_file") + ": exists and is not a directory");
  CHECK(tapegrad::data::testing::read_all(g.dir.file("a_file")) == "keep");
  // --out cannot be created (its parent is a file).
  require_error(train(g.text(), {"--out", g.dir.file("a_file") + "/tok"}), "--out " + g.dir.file("a_file") + "/tok: cannot create the directory");
  // --out is not writable (meaningless as root, which may write anyway).
  if (::geteuid() != 0) {
    fs::create_directories(g.dir.file("ro"));
    fs::permissions(g.dir.file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    require_error(train(g.text(), {"--out", g.dir.file("ro")}), "--out " + g.dir.file("ro") + ": the directory is not writable");
    fs::permissions(g.dir.file("ro"), fs::perms::owner_all);
    CHECK(fs::is_empty(g.dir.file("ro")));
  }
}

TEST_CASE("tool: tokenize encode refuses an --out that is a directory, the input itself, or not writable", "[tool]") {
  Gaps g("tokenize_encode");
  const std::string tok = g.tokenizer(), text = g.text();
  const std::string original = tapegrad::data::testing::read_all(text);
  auto encode = [&](const std::string& out) {
    return g.tool({"tokenize", "encode", "--tokenizer", tok, "--input", text, "--out", out, "--threads", "1"});
  };
  fs::create_directories(g.dir.file("outdir"));
  require_error(encode(g.dir.file("outdir")), "--out " + g.dir.file("outdir") + ": is a directory");
  CHECK(fs::is_empty(g.dir.file("outdir")));
  require_error(encode(text), "--out " + text + ": is the --input file");
  CHECK(tapegrad::data::testing::read_all(text) == original);
  // The same file under another name is still the input.
  require_error(encode(g.dir.path.string() + "/./stories.txt"), "is the --input file");
  CHECK(tapegrad::data::testing::read_all(text) == original);
  if (::geteuid() != 0) {
    fs::create_directories(g.dir.file("ro"));
    fs::permissions(g.dir.file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    require_error(encode(g.dir.file("ro") + "/x.bin"), "the directory " + g.dir.file("ro") + " is not writable");
    fs::permissions(g.dir.file("ro"), fs::perms::owner_all);
    CHECK(fs::is_empty(g.dir.file("ro")));
  }
  CHECK_FALSE(has_temp_files(g.dir.path.string()));
  // The checks do not refuse a good output.
  const ToolResult r = encode(g.dir.file("ok.bin"));
  INFO(r.err);
  CHECK(r.exit_code == 0);
}

TEST_CASE("tool: unknown commands, formats and subcommands are named", "[tool]") {
  Gaps g("unknown");
  require_error(g.tool({"frobnicate"}), "unknown command 'frobnicate' (try: tapegrad help)");
  require_error(g.tool({"import"}), "import: expected a format: llama2c or hf");
  require_error(g.tool({"import", "foo", "--out", g.dir.file("o")}), "import: unknown format 'foo' (expected llama2c or hf)");
  require_error(g.tool({"tokenize"}), "tokenize: expected a subcommand, train or encode");
  require_error(g.tool({"tokenize", "foo"}), "tokenize: unknown subcommand 'foo' (expected train or encode)");
  require_error(g.tool({"export"}), "export: expected a format: hf");
  require_error(g.tool({"export", "safetensors"}), "export: unknown format 'safetensors' (expected hf or llama2c)");
  CHECK_FALSE(fs::exists(g.dir.file("o")));
}

TEST_CASE("tool: a missing required flag or positional argument is named, nothing is written", "[tool]") {
  Gaps g("required");
  const std::string o = g.dir.file("o"), t = g.dir.file("t.txt");
  write_all(t, "some text");
  const std::string missing = "is required but missing";
  require_error(g.tool({"eval", "--data", g.dir.file("x.bin")}), "the option '--checkpoint' " + missing);
  require_error(g.tool({"generate", "--prompt", "hi"}), "the option '--checkpoint' " + missing);
  require_error(g.tool({"tokenize", "train", "--vocab-size", "300", "--out", o}), "the option '--input' " + missing);
  require_error(g.tool({"tokenize", "train", "--input", t, "--out", o}), "the option '--vocab-size' " + missing);
  require_error(g.tool({"tokenize", "train", "--input", t, "--vocab-size", "300"}), "the option '--out' " + missing);
  require_error(g.tool({"tokenize", "encode", "--input", t, "--out", o}), "the option '--tokenizer' " + missing);
  require_error(g.tool({"tokenize", "encode", "--tokenizer", g.dir.file("tok"), "--out", o}), "the option '--input' " + missing);
  require_error(g.tool({"tokenize", "encode", "--tokenizer", g.dir.file("tok"), "--input", t}), "the option '--out' " + missing);
  require_error(g.tool({"import", "llama2c", "m.bin", "t.bin"}), "the option '--out' " + missing);
  require_error(g.tool({"import", "llama2c", "m.bin", "--out", o}), "import llama2c: expected MODEL.bin and TOKENIZER.bin");
  require_error(g.tool({"import", "llama2c", "--out", o}), "import llama2c: expected MODEL.bin and TOKENIZER.bin");
  require_error(g.tool({"import", "hf", "--out", o}), "import hf: expected DIR");
  require_error(g.tool({"import", "hf", g.dir.file("hf")}), "the option '--out' " + missing);
  require_error(g.tool({"export", "hf", "--out", o}), "export hf: expected CHECKPOINT");
  require_error(g.tool({"export", "hf", g.dir.file("c.safetensors")}), "the option '--out' " + missing);
  // Boost's errors say where to look.
  CHECK_THAT(g.tool({"eval"}).err, Catch::Contains("(try: tapegrad eval --help)"));
  CHECK_FALSE(fs::exists(o));
}

TEST_CASE("tool: --device names a device this build or machine does not have", "[tool]") {
  Gaps g("device");
  const std::string out = g.dir.file("run");
  // cuda:7 exists nowhere this runs: no CUDA backend, no device, or fewer devices.
  require_error(g.tool(g.train(out, 2, {"--device", "cuda:7"})), "--device cuda:7: device cuda:7: ");
  // Plain cuda: the message of the library's own refusal, when this process sees no usable device.
  std::string refusal;
  try {
    (void)tapegrad::kernels::backend(tapegrad::Device::cuda(0));
  } catch (const tapegrad::Error& e) {
    refusal = e.what();
  }
  if (!refusal.empty()) require_error(g.tool(g.train(out, 2, {"--device", "cuda"})), "--device cuda: " + refusal);
  require_error(g.tool(g.train(out, 2, {"--device", "tpu"})), "--device tpu: device: 'tpu' is not a device");
  CHECK_FALSE(fs::exists(out));
}


TEST_CASE("tool: a negative --threads is refused by every command that has it", "[tool]") {
  Gaps g("threads");
  const std::string o = g.dir.file("o"), c = g.dir.file("c.safetensors"), t = g.dir.file("t.txt");
  write_all(t, "some text");
  const std::vector<std::vector<std::string>> commands = {
      replaced(g.train(o, 2), "--threads", "-1"),
      {"eval", "--checkpoint", c, "--data", g.dir.file("x.bin"), "--threads", "-1"},
      {"generate", "--checkpoint", c, "--prompt", "hi", "--threads", "-1"},
      {"info", "--threads", "-1"},
      {"info", "--checkpoint", c, "--threads", "-1"},
      {"demo", "--steps", "1", "--threads", "-1"},
      {"tokenize", "train", "--input", t, "--vocab-size", "300", "--out", o, "--threads", "-1"},
      {"tokenize", "encode", "--tokenizer", g.dir.file("tok"), "--input", t, "--out", o, "--threads", "-1"},
  };
  for (const auto& args : commands) {
    INFO(args[0] << " " << args[1]);
    const ToolResult r = g.tool(args);
    require_error(r, "--threads must be >= 0 (0: all cores), but is -1");
    CHECK(r.out.empty());
  }
  CHECK_FALSE(fs::exists(o));
}

TEST_CASE("tool: --config with a bad value or a line without '=' names the file and what is wrong", "[tool]") {
  Gaps g("config");
  const std::string out = g.dir.file("run"), bad_value = g.dir.file("bad_value.ini"), bad_line = g.dir.file("bad_line.ini");
  write_all(bad_value, "# schedule\neval-every = abc\n");
  write_all(bad_line, "steps = 3\njust a line\n");
  ToolResult r = g.tool(g.train(out, 2, {"--config", bad_value}));
  require_error(r, "--config '" + bad_value + "': the argument ('abc') for option 'eval-every' is invalid");
  r = g.tool(g.train(out, 2, {"--config", bad_line}));
  require_error(r, "--config '" + bad_line + "': ");
  CHECK_THAT(r.err, Catch::Contains("invalid line 'just a line'"));
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("tool: train refuses conflicting data flags and impossible model shapes before making --out", "[tool]") {
  Gaps g("train_flags");
  const std::string out = g.dir.file("run"), bytes = g.byte_tokens();
  const std::vector<std::string> model{"--context", "16", "--d-model", "16", "--layers", "1", "--heads", "2", "--out", out};
  const std::string either = "give one of --text FILE, --train TOKENS.bin or --sft FILE.jsonl (not several, not none)";
  require_error(g.tool(with({"train"}, model)), either);
  require_error(g.tool(with({"train", "--train", bytes, "--text", g.text()}, model)), either);
  require_error(g.tool(with({"train", "--text", g.text(), "--val", bytes}, model)),
                "--val goes with --train; --text holds out its own validation part");
  require_error(g.tool(g.train(out, 2, {"--tokens", "1000"})), "give --steps or --tokens, not both");
  require_error(g.tool(g.train(out, 2, {"--kv-heads", "3"})), "--kv-heads 3 must divide --heads 2");
  require_error(g.tool(replaced(g.train(out, 2), "--context", "0")), "--context must be positive, but is 0");
  require_error(g.tool(replaced(g.train(out, 2), "--layers", "0")), "--layers must be positive, but is 0");
  require_error(g.tool(replaced(g.train(out, 2), "--d-model", "6")),
                "TransformerLM: the head dim d_model / n_heads = 3 must be even (RoPE)");
  require_error(g.tool(g.train(out, 2, {"--model", "huge"})), "unknown model preset 'huge' (presets: ");
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("tool: train's schedule flags refuse negative values naming the flag, 0 keeps its meaning", "[tool]") {
  Gaps g("schedule");
  const std::string out = g.dir.file("run");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--eval-every", "-1"}, "--eval-every must be >= 0 (0: only at the end), but is -1"},
      {{"--checkpoint-every", "-5"}, "--checkpoint-every must be >= 0 (0: only at the end), but is -5"},
      {{"--eval-batch-size", "-2"}, "--eval-batch-size must be >= 0 (0: the batch size), but is -2"},
      {{"--log-every", "0"}, "--log-every must be at least 1, but is 0"},
      {{"--log-every", "-3"}, "--log-every must be at least 1, but is -3"},
      {{"--print-every", "-1"}, "--print-every must be >= 0 (0: steps/50), but is -1"},
      {{"--grad-clip", "-0.5"}, "--grad-clip must be finite and >= 0 (0: off), but is -0.5"},
      {{"--cosine-steps", "-1"}, "--cosine-steps must be >= 0 (0: steps), but is -1"},
  };
  for (const auto& [flags, message] : cases) {
    INFO(flags[0]);
    require_error(g.tool(g.train(out, 3, flags)), message);
    CHECK_FALSE(fs::exists(out));
  }
  // 0 where it means something: evaluate and checkpoint only at the end, the batch size for the
  // evaluation, the default progress interval, no clipping, the cosine over all steps.
  std::vector<uint32_t> val(200);
  for (size_t i = 0; i < val.size(); ++i) val[i] = uint32_t(i * 7 % 256);
  tapegrad::data::write_token_file(g.dir.file("val.bin"), val, 256);
  const ToolResult r = g.tool(g.train(out, 3, {"--val", g.dir.file("val.bin"), "--eval-every", "0", "--checkpoint-every", "0",
                                               "--eval-batch-size", "0", "--print-every", "0", "--grad-clip", "0",
                                               "--cosine-steps", "0"}));
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  const auto ckpts = tapegrad::lm::list_step_checkpoints(out);
  REQUIRE(ckpts.size() == 1);
  CHECK(ckpts[0].first == 3);
  size_t evals = 0;
  for (const std::string& line : lines_of(ToolProcess::slurp(out + "/metrics.jsonl")))
    evals += line.find("\"kind\":\"eval\"") != std::string::npos;
  CHECK(evals == 1);
}

TEST_CASE("tool: --text and --prompt-file naming a directory or a missing file are refused by name", "[tool]") {
  Gaps g("text_dir");
  const std::string out = g.dir.file("run"), dir = g.dir.file("a_dir"), missing = g.dir.file("missing.txt");
  fs::create_directories(dir);
  const std::string tok = g.tokenizer();
  require_error(g.tool({"train", "--text", dir, "--tokenizer", tok, "--out", out}),
                "--text: the directory " + dir + " holds no text file");
  require_error(g.tool({"train", "--text", missing, "--tokenizer", tok, "--out", out}), "--text: cannot open " + missing + ": no such file or directory");
  CHECK_FALSE(fs::exists(out));

  // A run directory with its tokenizer next to the checkpoint.
  const std::string ckpt = g.model_checkpoint("run300", 300);
  fs::copy_file(tok + "/tokenizer.json", g.dir.file("run300/tokenizer.json"));
  require_error(g.tool({"eval", "--checkpoint", ckpt, "--text", dir}), "--text: the directory " + dir + " holds no text file");
  require_error(g.tool({"eval", "--checkpoint", ckpt, "--text", missing}), "--text: cannot open " + missing);
  ToolResult r = g.tool({"generate", "--checkpoint", ckpt, "--prompt-file", dir});
  require_error(r, "--prompt-file: " + dir + " is a directory, not a file");
  CHECK(r.out.empty());
  require_error(g.tool({"generate", "--checkpoint", ckpt, "--prompt-file", missing}), "--prompt-file: cannot open " + missing);
  // The same commands run with a file.
  r = g.tool({"eval", "--checkpoint", ckpt, "--text", g.text(), "--threads", "1"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
}

TEST_CASE("tool: eval refuses two or none of --data, --text and --choices, and --held-out without --text", "[tool]") {
  Gaps g("eval_flags");
  const std::string ckpt = g.model_checkpoint("run", 256), bytes = g.byte_tokens();
  const std::string either = "give one of --data TOKENS.bin, --text FILE or --choices FILE.jsonl";
  require_error(g.tool({"eval", "--checkpoint", ckpt}), either);
  require_error(g.tool({"eval", "--checkpoint", ckpt, "--data", bytes, "--text", g.text()}), either);
  require_error(g.tool({"eval", "--checkpoint", ckpt, "--data", bytes, "--held-out", "0.1"}), "--held-out goes with --text");
  const ToolResult r = g.tool({"eval", "--checkpoint", ckpt, "--data", bytes, "--threads", "1"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
}

TEST_CASE("tool: dot --html without --out writes the DOT graph beside the page", "[tool]") {
  Gaps g("dot_html");
  const std::string page = g.dir.file("x.html"), beside = g.dir.file("x.dot");
  ToolResult r = g.tool({"dot", "--values", "--html", page});
  INFO(r.out + r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::exists(page));
  REQUIRE(fs::exists(beside));
  CHECK_THAT(r.out, Catch::Contains("wrote " + beside) && Catch::Contains("wrote " + page));
  CHECK_THAT(tapegrad::data::testing::read_all(beside), Catch::Contains("data "));  // --values went into it
  // --out still chooses the DOT's name: nothing is written beside the page then.
  const std::string other = g.dir.file("y.html"), named = g.dir.file("named.dot");
  r = g.tool({"dot", "--html", other, "--out", named});
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(named));
  CHECK_FALSE(fs::exists(g.dir.file("y.dot")));
}

TEST_CASE("tool: demo refuses negative steps, demo and dot name an output they cannot write", "[tool]") {
  Gaps g("demo");
  ToolResult r = g.tool({"demo", "--steps", "-5"});
  require_error(r, "--steps must be >= 0, but is -5");
  CHECK(r.out.empty());
  const std::string nowhere = g.dir.file("no/such/dir/graph.dot");
  require_error(g.tool({"dot", "--out", nowhere}),
                "dot --out: cannot write " + nowhere + " (temp file " + nowhere + ".tmp): No such file or directory");
  require_error(g.tool({"demo", "--steps", "1", "--threads", "1", "--dot", nowhere}), "demo --dot: cannot write " + nowhere);
  CHECK_FALSE(fs::exists(g.dir.file("no")));
  // 0 steps is a valid run (one gradient step on the initial loss, then the gradcheck).
  r = g.tool({"demo", "--steps", "0", "--threads", "1"});
  INFO(r.out + r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("gradcheck passed"));
}

TEST_CASE("tool: export hf to an --out it cannot make, import hf of a tokenizer.json too large or unreadable", "[tool]") {
  Gaps g("hf");
  const std::string ckpt = g.model_checkpoint("run", 256);
  write_all(g.dir.file("a_file"), "x");
  require_error(g.tool({"export", "hf", ckpt, "--out", g.dir.file("a_file") + "/hf"}),
                "export hf: cannot create the directory '" + g.dir.file("a_file") + "/hf'");
  const std::string hf = g.dir.file("hf"), out = g.dir.file("imported"), tok_json = g.dir.file("hf") + "/tokenizer.json";
  ToolResult r = g.tool({"export", "hf", ckpt, "--out", hf});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // A tokenizer of 300 tokens for a vocabulary of 256.
  fs::copy_file(g.tokenizer() + "/tokenizer.json", tok_json);
  require_error(g.tool({"import", "hf", hf, "--out", out}),
                "import hf: '" + tok_json + "' has 300 tokens, more than vocab_size 256");
  // Not JSON.
  write_all(tok_json, "{ \"model\": ");
  r = g.tool({"import", "hf", hf, "--out", out});
  require_error(r, tok_json + " is not valid JSON");
  // A directory.
  fs::remove(tok_json);
  fs::create_directories(tok_json);
  require_error(g.tool({"import", "hf", hf, "--out", out}), tok_json + " is a directory, not a file");
  CHECK_FALSE(fs::exists(out));
  // Without a tokenizer.json the import runs.
  fs::remove(tok_json);
  r = g.tool({"import", "hf", hf, "--out", out});
  INFO(r.err);
  CHECK(r.exit_code == 0);
}

TEST_CASE("tool: generate refuses an empty prompt, two prompt sources, a missing prompt file, a terminal", "[tool]") {
  Gaps g("prompt");
  const std::string ckpt = g.model_checkpoint("run", 300), empty = g.dir.file("empty.txt");
  fs::copy_file(g.tokenizer() + "/tokenizer.json", g.dir.file("run/tokenizer.json"));
  write_all(empty, "");
  const std::vector<std::string> gen{"generate", "--checkpoint", ckpt, "--max-tokens", "4", "--threads", "1"};
  const std::string is_empty = "generate: the prompt is empty (it needs at least one token)";
  ToolResult r = g.tool(with(gen, {"--prompt", ""}));
  require_error(r, is_empty);
  CHECK(r.out.empty());
  require_error(g.tool(with(gen, {"--prompt-file", empty})), is_empty);
  require_error(g.tool(gen), is_empty);  // stdin is /dev/null: piped, and empty
  require_error(g.tool(with(gen, {"--prompt", "Once", "--prompt-file", empty})), "give --prompt or --prompt-file, not both");
  require_error(g.tool(with(gen, {"--prompt-file", g.dir.file("missing.txt")})),
                "--prompt-file: cannot open " + g.dir.file("missing.txt"));

  // A terminal on stdin and no prompt flag: refused at once rather than waiting for typing.
  const int terminal = ::posix_openpt(O_RDWR | O_NOCTTY);
  REQUIRE(terminal >= 0);
  REQUIRE(::grantpt(terminal) == 0);
  REQUIRE(::unlockpt(terminal) == 0);
  {
    ToolProcess p(gen, g.dir.file("tty"), ToolOptions{-1, ::ptsname(terminal)});
    const bool ended = wait_until([&] {
      siginfo_t info{};
      return ::waitid(P_PID, id_t(p.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == p.pid();
    });
    ::close(terminal);  // a tool still reading the terminal now sees it end
    r = p.wait();
    CHECK(ended);
  }
  require_error(r, "no prompt: give --prompt TEXT, --prompt-file FILE, or pipe it on stdin");
  CHECK(r.out.empty());

  // A prompt: it runs.
  r = g.tool(with(gen, {"--prompt", "Once upon a time"}));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("Once upon a time"));
}

TEST_CASE("tool: eval and generate with no tokenizer next to the checkpoint, or one of another size", "[tool]") {
  Gaps g("no_tokenizer");
  // A model with a vocabulary of 320 and nothing next to its checkpoint.
  const std::string ckpt = g.model_checkpoint("run", 320);
  const std::string none = "no tokenizer for checkpoint '" + ckpt + "': pass --tokenizer (the run directory holds no tokenizer.json)";
  require_error(g.tool({"eval", "--checkpoint", ckpt, "--text", g.text()}), none);
  ToolResult r = g.tool({"generate", "--checkpoint", ckpt, "--prompt", "Once"});
  require_error(r, none);
  CHECK(r.out.empty());
  // A checkpoint outside a run directory.
  const std::string loose = g.dir.file("loose.safetensors");
  fs::copy_file(ckpt, loose);
  require_error(g.tool({"generate", "--checkpoint", loose, "--prompt", "Once"}), "no tokenizer for checkpoint '" + loose + "'");
  // An imported llama2.c model whose tokenizer.bin is gone.
  const std::string l2c = g.model_checkpoint("l2c", 320, {{"run.tokenizer_kind", "llama2c"}});
  require_error(g.tool({"generate", "--checkpoint", l2c, "--prompt", "Once"}),
                "no tokenizer for checkpoint '" + l2c + "': pass --tokenizer (the run directory holds no tokenizer.bin)");
  // A tokenizer of 300 tokens for the model's 320 (an imported model can be like that).
  r = g.tool({"generate", "--checkpoint", ckpt, "--tokenizer", g.tokenizer(), "--prompt", "Once"});
  require_error(r, "the tokenizer has 300 tokens but the model's vocabulary is 320: another tokenizer?");
  CHECK(r.out.empty());
}

TEST_CASE("tool: a --resume that is refused leaves no run directory behind", "[tool]") {
  Gaps g("resume_refused");
  // A checkpoint without the trainer's extras, as `import` writes one.
  const std::string imported = g.model_checkpoint("imported", 256), fresh = g.dir.file("fresh");
  const std::vector<std::string> args{"train", "--train", g.byte_tokens(), "--batch-size", "4", "--steps", "2",
                                      "--threads", "1", "--resume", imported, "--out", fresh};
  ToolResult r = g.tool(args);
  require_error(r, "checkpoint '" + imported + "'");
  CHECK_THAT(r.err, Catch::Contains("tokens"));
  CHECK_FALSE(fs::exists(fresh));
  // An --out that was there before stays, with what it held; only the checkpoints/ made for the run goes.
  fs::create_directories(fresh);
  write_all(fresh + "/notes.txt", "mine");
  require_error(g.tool(args), "checkpoint '" + imported + "'");
  CHECK(fs::exists(fresh + "/notes.txt"));
  CHECK_FALSE(fs::exists(fresh + "/checkpoints"));
  fs::remove_all(fresh);

  // A checkpoint of another model config, resumed into a new directory.
  const std::string run = g.dir.file("run");
  r = g.tool(g.train(run, 2));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  require_error(g.tool(with(replaced(g.train(fresh, 4), "--d-model", "32"), {"--resume", tapegrad::lm::step_checkpoint_path(run, 2)})),
                "d_model 16 (file) vs 32 (expected)");
  CHECK_FALSE(fs::exists(fresh));
  // And the same resume with the right config works there.
  r = g.tool(with(g.train(fresh, 4), {"--resume", tapegrad::lm::step_checkpoint_path(run, 2)}));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(tapegrad::optim::read_checkpoint(tapegrad::lm::step_checkpoint_path(fresh, 4)).step == 4);
}

TEST_CASE("tool: training that diverges exits 3 naming the step and the newest checkpoint, none of that step", "[tool]") {
  Gaps g("diverge");
  const std::string out = g.dir.file("run");
  const ToolResult r = g.tool(g.train(out, 12, {"--lr", "1e30", "--min-lr", "0", "--warmup-steps", "0", "--grad-clip", "0",
                                                "--checkpoint-every", "1", "--keep-last", "100"}));
  require_error(r, "tapegrad: training diverged: step ", 3);
  std::smatch m;
  REQUIRE(std::regex_search(r.err, m, std::regex("training diverged: step ([0-9]+): (.*); the newest checkpoint is (.*) "
                                                 "\\(rerun with --detect-anomaly to find the op\\)")));
  CHECK_THAT(m[2].str(), Catch::Contains("not finite") || Catch::Contains("NaN"));
  const int64_t diverged = std::stoll(m[1]);
  const auto list = tapegrad::lm::list_step_checkpoints(out);
  if (diverged == 1) {
    CHECK(list.empty());
    CHECK(m[3] == "(none)");
  } else {
    REQUIRE_FALSE(list.empty());
    CHECK(list.back().first == diverged - 1);  // every step before it, none of it
    CHECK(m[3] == list.back().second);
  }
}

TEST_CASE("tool: a second Ctrl-C ends training at once, without finishing the step", "[tool]") {
  Gaps g("second_sigint");
  const std::string out = g.dir.file("run");
  // Slow steps (256 micro-batches of 16 windows: about 0.1 s), checkpoints only at the end or on a stop.
  const auto args = replaced(g.train(out, 100000, {"--grad-accum", "256"}), "--batch-size", "16");
  // The first Ctrl-C asks for a stop after the step and resets SIGINT to its default action; a
  // second one then ends the process. Rarely the stop completes (exit 130) before the second
  // signal arrives: that attempt proves nothing and is repeated.
  ToolResult r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    fs::remove_all(out);
    ToolProcess p(args, g.dir.file("sigint"));
    REQUIRE(wait_until([&] { return is_tool(p.pid()) && catches(p.pid(), SIGINT); }));  // the stop handler is in place
    p.send(SIGINT);
    REQUIRE(wait_until([&] { return !catches(p.pid(), SIGINT); }));  // taken: back to the default
    p.send(SIGINT);
    r = p.wait();
    if (r.exit_code != 128 + SIGINT) break;
  }
  INFO("exit " << r.exit_code << ", stderr: " << r.err);
  CHECK(r.signal == SIGINT);
}
