// child_process.h — what the CUDA-plugin tests (tests/test_cuda_plugin.cpp, tests/cuda/test_cuda_plugin.cpp)
// share: run a program (the tool, or this test binary again on one hidden test case, so that the check runs
// in a fresh process whatever the tests before it loaded) with extra environment variables, its output
// captured to files; its exit, stdout, stderr and peak RSS (wait4's ru_maxrss). And the CUDA libraries
// mapped into this process, read from /proc/self/maps.
#pragma once
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

namespace tapegrad::testing {

struct ChildResult {
  int exit_code = -1;  // -1 when ended by a signal
  int signal = 0;
  std::string out, err;
  long max_rss_kb = 0;  // the child's peak resident set (ru_maxrss)
};

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs argv[0] (a path) with argv, env added to this process's environment, stdin /dev/null, one OpenMP thread.
using EnvVars = std::vector<std::pair<std::string, std::string>>;

inline ChildResult run_child(const std::vector<std::string>& argv, const EnvVars& env, const std::string& log_prefix) {
  const std::string out_path = log_prefix + ".out", err_path = log_prefix + ".err";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = ::open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || in < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
    std::vector<std::string> args = argv;
    std::vector<char*> c_args;
    for (std::string& a : args) c_args.push_back(a.data());
    c_args.push_back(nullptr);
    ::execv(c_args[0], c_args.data());
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  REQUIRE(::wait4(pid, &status, 0, &usage) == pid);
  ChildResult r;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = read_text_file(out_path);
  r.err = read_text_file(err_path);
  r.max_rss_kb = usage.ru_maxrss;
  return r;
}

// This test binary itself (to run one hidden test case of it in a fresh process).
inline std::string self_executable() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

// The files mapped into this process whose names say CUDA: libcuda*, libcudart*, libcublas* (and Lt),
// libnccl*, and the plugin libtapegrad_cuda*; each once.
inline std::vector<std::string> cuda_libraries_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::vector<std::string> found;
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string name = std::filesystem::path(path).filename().string();
    bool cuda = false;
    for (const char* prefix : {"libcuda", "libcublas", "libnccl", "libtapegrad_cuda"})
      cuda = cuda || name.starts_with(prefix);
    bool seen = false;
    for (const std::string& f : found) seen = seen || f == path;
    if (cuda && !seen) found.push_back(path);
  }
  return found;
}

}  // namespace tapegrad::testing
