// test_tool_chat.cpp — `tapegrad chat` on a micro model instruction-tuned here (train --sft, a byte
// tokenizer): through a pipe (one turn per line, an empty line for an empty line, /reset, /quit, /help, an
// unknown /word refused, no prompt, stop strings, old turns dropped with a line on stderr) and through a
// pseudo-terminal (the "> " prompt, a streamed answer, /quit, errors as one "chat: …" line); a checkpoint without
// a chat template and a bad --device are refused with one clear line.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/bpe_model.h"
#include "data/hf_tokenizer_json.h"
#include "test_data_helpers.h"
#include "tool_runner.h"

using tapegrad::data::testing::ScratchDir;
using tapegrad::data::testing::write_all;
using namespace tapegrad::testing;

namespace {

// A byte-level tokenizer without merges (id = byte), and an SFT run on it: the user says a name, the
// assistant greets it.
struct ChatRun {
  ScratchDir dir{"tool_chat"};
  std::string run = dir.file("sft");

  ChatRun() {
    tapegrad::data::BpeModel bytes;
    for (int b = 0; b < 256; ++b) bytes.vocab.emplace_back(1, char(b));
    tapegrad::data::save_hf_tokenizer_json(bytes, dir.file("tokenizer.json"));
    std::string lines;
    for (const char* name : {"ann", "bob", "cy", "dee", "eve", "flo", "gus", "hal"})
      lines += std::string(R"({"messages": [{"role": "user", "content": ")") + name +
               R"("}, {"role": "assistant", "content": "hi )" + name + "\"}]}\n";
    write_all(dir.file("chat.jsonl"), lines);
    const ToolResult r = run_tool({"train", "--sft", dir.file("chat.jsonl"), "--tokenizer", dir.file("tokenizer.json"),
                                   "--context", "40", "--d-model", "32", "--layers", "1", "--heads", "2",
                                   "--batch-size", "4", "--steps", "3", "--threads", "1", "--out", run},
                                  dir.file("train"));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  std::vector<std::string> chat_args(std::vector<std::string> more) const {
    std::vector<std::string> a{"chat", "--checkpoint", run, "--greedy", "--max-tokens", "6", "--threads", "1"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
  ToolResult chat_piped(const std::string& input, std::vector<std::string> more, const std::string& tag) const {
    write_all(dir.file(tag + ".in"), input);
    ToolOptions o;
    o.stdin_path = dir.file(tag + ".in");
    return run_tool(chat_args(std::move(more)), dir.file(tag), o);
  }
};

// The tool on a pseudo-terminal (its stdin and stdout; stderr to a file).
class PtyTool {
 public:
  PtyTool(const std::vector<std::string>& args, const std::string& err_path) {
    std::vector<std::string> argv_s{TAPEGRAD_TOOL_PATH};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    pid_ = ::forkpty(&fd_, nullptr, nullptr, nullptr);
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err < 0) ::_exit(126);
      ::dup2(err, 2);
      ::setenv("OMP_NUM_THREADS", "1", 1);
      std::vector<char*> argv;
      for (std::string& s : argv_s) argv.push_back(s.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~PtyTool() {
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(fd_);
  }
  PtyTool(const PtyTool&) = delete;
  PtyTool& operator=(const PtyTool&) = delete;

  void write_line(const std::string& s) {
    const std::string line = s + "\n";
    REQUIRE(::write(fd_, line.data(), line.size()) == ssize_t(line.size()));
  }
  // Everything read so far, once it holds at least `bytes` bytes or `seconds` passed (or the tool ended).
  const std::string& read_at_least(size_t bytes, double seconds = 30) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (out_.size() < bytes && std::chrono::steady_clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) break;  // EIO: the tool ended and closed the terminal
      out_.append(buf, size_t(n));
    }
    return out_;
  }
  int wait_exit(double seconds = 30) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int status = 0;
    while (std::chrono::steady_clock::now() < until) {
      read_at_least(out_.size() + 1, 0.05);  // keep the terminal drained
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
    }
    return -2;
  }

 private:
  int fd_ = -1;
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string out_;
};

}  // namespace

TEST_CASE("tool: chat through a pipe: one answer per turn, /reset, /quit, no prompt", "[chat][tool]") {
  ChatRun run;
  // --stop "\n": an answer never spans lines, so each answer is one line of stdout.
  const ToolResult r = run.chat_piped("ann\nbob\n/reset\nann\n\n/quit\nnever read\n", {"--stop", "\n"}, "pipe");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> answers = lines_of(r.out);
  REQUIRE(answers.size() == 4);  // ann, bob, ann again, the empty line's empty line (/quit ends it)
  CHECK(answers[2] == answers[0]);  // after /reset the same first turn gives the same greedy answer
  CHECK(answers[3].empty());
  CHECK(r.out.find("> ") == std::string::npos);  // no prompt when stdin is not a terminal
  CHECK(r.err.find("chat with") == std::string::npos);
  // Each answer is at most --max-tokens 6 byte tokens (a byte outside UTF-8: 3 bytes of U+FFFD), without
  // the template's special tokens.
  for (const std::string& a : answers) {
    CHECK(a.size() <= 6 * 3);
    CHECK(a.find("<|") == std::string::npos);
  }
}

TEST_CASE("tool: chat through a pipe: an empty line gets an empty line, /help lists the commands, /rest is refused",
          "[chat][tool]") {
  ChatRun run;
  // One line out per line in, so that answers line up with questions (before: the empty line gave none).
  const ToolResult r = run.chat_piped("ann\n\nbob\n", {"--stop", "\n"}, "empty");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> out = lines_of(r.out);
  REQUIRE(out.size() == 3);
  CHECK(out[1].empty());
  // The empty line was not sent to the model: bob's answer is the one that follows ann's turn directly.
  CHECK(out[2] == lines_of(run.chat_piped("ann\nbob\n", {"--stop", "\n"}, "no_empty").out).at(1));
  // /help: the commands on stderr, nothing for the model, nothing on stdout.
  const ToolResult help = run.chat_piped("/help\nann\n", {"--stop", "\n"}, "help");
  CHECK(help.exit_code == 0);
  CHECK(lines_of(help.out) == std::vector<std::string>{out[0]});
  for (const char* c : {"/help", "/reset", "/quit", "//text"}) CHECK(help.err.find(c) != std::string::npos);
  // A mistyped command is refused naming the nearest one, never sent to the model; piped, the exit status says so.
  const ToolResult typo = run.chat_piped("ann\n/rest\nbob\n", {"--stop", "\n"}, "typo");
  CHECK(typo.exit_code == 2);
  CHECK(lines_of(typo.out) == std::vector<std::string>{out[0]});
  CHECK(lines_of(typo.err).back().starts_with("tapegrad: chat: unknown command /rest (did you mean /reset?)"));
}

TEST_CASE("tool: chat drops the oldest turns when the context is full and says so on stderr", "[chat][tool]") {
  ChatRun run;
  std::string input;
  for (int i = 0; i < 6; ++i) input += "flo and gus\n";  // 11 bytes + 3 + 6 + 1 ids: two turns fill 40
  const ToolResult r = run.chat_piped(input, {"--system", "be kind", "--stop", "\n"}, "drop");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(lines_of(r.out).size() == 6);
  CHECK(r.err.find("outgrew the context of 40 tokens: dropped the oldest") != std::string::npos);
  // A message that can never fit is an error for a script (exit status), naming the context.
  const ToolResult bad = run.chat_piped(std::string(60, 'x') + "\n", {}, "too_long");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("more than the model's context of 40") != std::string::npos);
}

TEST_CASE("tool: chat on a terminal: a prompt, the streamed answer, /quit", "[chat][tool]") {
  ChatRun run;
  const ToolResult piped = run.chat_piped("cy\n", {"--stop", "\n"}, "reference");
  REQUIRE(piped.exit_code == 0);
  const std::string answer = piped.out.substr(0, piped.out.size() - 1);  // without its '\n'
  PtyTool tty(run.chat_args({"--stop", "\n"}), run.dir.file("tty.err"));
  CHECK(tty.read_at_least(2) == "> ");
  tty.write_line("cy");
  // The terminal echoes the line, then the answer streams, then the next prompt (the terminal writes
  // each '\n' as "\r\n").
  const std::string want = "> cy\r\n" + answer + "\r\n> ";
  CHECK(tty.read_at_least(want.size()) == want);
  tty.write_line("/quit");
  CHECK(tty.wait_exit() == 0);
  CHECK(tty.read_at_least(want.size() + 7) == want + "/quit\r\n");
  std::ifstream err_file(run.dir.file("tty.err"));
  const std::string err((std::istreambuf_iterator<char>(err_file)), std::istreambuf_iterator<char>());
  CHECK(err.find("chat with") != std::string::npos);  // the banner, on a terminal only
  CHECK(err.find("/reset, /quit") != std::string::npos);
}

TEST_CASE("tool: chat on a terminal: an error or an unknown command is one line \"chat: …\" and the chat goes on",
          "[chat][tool]") {
  ChatRun run;
  PtyTool tty(run.chat_args({"--stop", "\n"}), run.dir.file("tty_err.err"));
  CHECK(tty.read_at_least(2) == "> ");
  const std::string too_long(60, 'x');  // more than the context of 40
  tty.write_line(too_long);
  std::string want = "> " + too_long + "\r\n> ";
  CHECK(tty.read_at_least(want.size()) == want);
  tty.write_line("/rest");
  want += "/rest\r\n> ";
  CHECK(tty.read_at_least(want.size()) == want);
  tty.write_line("/quit");
  CHECK(tty.wait_exit() == 0);
  std::ifstream err_file(run.dir.file("tty_err.err"));
  const std::string err((std::istreambuf_iterator<char>(err_file)), std::istreambuf_iterator<char>());
  CHECK(err.find("\nchat: this message takes") != std::string::npos);
  CHECK(err.find("chat: chat:") == std::string::npos);  // before: the prefix twice
  CHECK(err.find("\nchat: unknown command /rest (did you mean /reset?)") != std::string::npos);
}

TEST_CASE("tool: chat refuses a checkpoint without a chat template, a bad --cuda-graph, and eval, generate and chat a "
          "bad --device",
          "[chat][tool]") {
  ScratchDir dir("tool_chat_plain");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the cat sat on the mat " + std::to_string(i) + ".\n\n";  // documents
  write_all(dir.file("text.txt"), text);
  tapegrad::data::BpeModel bytes;
  for (int b = 0; b < 256; ++b) bytes.vocab.emplace_back(1, char(b));
  tapegrad::data::save_hf_tokenizer_json(bytes, dir.file("tokenizer.json"));
  const std::string run = dir.file("plain");
  ToolResult r = run_tool({"train", "--text", dir.file("text.txt"), "--tokenizer", dir.file("tokenizer.json"),
                           "--context", "16", "--d-model", "16", "--layers", "1", "--heads", "2", "--batch-size", "2",
                           "--steps", "1", "--threads", "1", "--out", run},
                          dir.file("train"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  r = run_tool({"chat", "--checkpoint", run}, dir.file("chat"));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("has no chat template: instruction-tune it with train --sft") != std::string::npos);
  for (const std::string cmd : {"eval", "generate", "chat"}) {
    std::vector<std::string> args{cmd, "--checkpoint", run, "--device", "tpu"};
    if (cmd == "eval") args.insert(args.end(), {"--text", dir.file("text.txt")});
    if (cmd == "generate") args.insert(args.end(), {"--prompt", "the"});
    r = run_tool(args, dir.file("device_" + cmd));
    INFO(cmd << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--device tpu") != std::string::npos);
  }
  // --cuda-graph is on or off, for chat as for generate.
  r = run_tool({"chat", "--checkpoint", run, "--cuda-graph", "maybe"}, dir.file("chat_graph"));
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--cuda-graph must be on or off, but is 'maybe'") != std::string::npos);
  // On the CPU (the default, or said) eval and generate run as before.
  r = run_tool({"generate", "--checkpoint", run, "--prompt", "the", "--max-tokens", "3", "--device", "cpu"},
               dir.file("generate_cpu"));
  CHECK(r.exit_code == 0);
}
