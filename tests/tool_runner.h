// tool_runner.h — runs the built `tapegrad` binary from a test (fork + exec, output captured to
// files): its exit code or the signal that ended it, stdout, stderr. The path of the binary comes
// from CMake (TAPEGRAD_TOOL_PATH). Used by tests/test_tool_*.cpp.
#pragma once
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

namespace tapegrad::testing {

struct ToolResult {
  int exit_code = -1;  // -1 when ended by a signal
  int signal = 0;      // the signal that ended it, 0 if none
  std::string out, err;
};

struct ToolOptions {
  long file_size_limit = -1;  // RLIMIT_FSIZE in bytes for the child (< 0: unchanged)
  std::string stdin_path;     // the child's stdin ("" : /dev/null)
};

class ToolProcess {
 public:
  // Starts `tapegrad args...` with stdout/stderr going to `log_prefix`.out/.err, one OpenMP thread.
  ToolProcess(const std::vector<std::string>& args, const std::string& log_prefix, ToolOptions opts = {})
      : out_path_(log_prefix + ".out"), err_path_(log_prefix + ".err") {
    std::vector<std::string> argv_s{TAPEGRAD_TOOL_PATH};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      const int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int in = ::open(opts.stdin_path.empty() ? "/dev/null" : opts.stdin_path.c_str(), O_RDONLY);
      if (out < 0 || err < 0 || in < 0) ::_exit(126);
      ::dup2(in, 0);
      ::dup2(out, 1);
      ::dup2(err, 2);
      if (opts.file_size_limit >= 0) {
        rlimit lim{rlim_t(opts.file_size_limit), rlim_t(opts.file_size_limit)};
        ::setrlimit(RLIMIT_FSIZE, &lim);
      }
      ::setenv("OMP_NUM_THREADS", "1", 1);
      std::vector<char*> argv;
      for (std::string& s : argv_s) argv.push_back(s.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~ToolProcess() {
    if (pid_ > 0 && !waited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  ToolProcess(const ToolProcess&) = delete;
  ToolProcess& operator=(const ToolProcess&) = delete;

  void send(int sig) const { ::kill(pid_, sig); }
  pid_t pid() const { return pid_; }
  ToolResult wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    waited_ = true;
    ToolResult r;
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    r.out = slurp(out_path_);
    r.err = slurp(err_path_);
    return r;
  }
  static std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
  }

 private:
  std::string out_path_, err_path_;
  pid_t pid_ = -1;
  bool waited_ = false;
};

// Runs the tool to completion.
inline ToolResult run_tool(const std::vector<std::string>& args, const std::string& log_prefix, ToolOptions opts = {}) {
  ToolProcess p(args, log_prefix, opts);
  return p.wait();
}

// The lines of a text, without their '\n'.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace tapegrad::testing
