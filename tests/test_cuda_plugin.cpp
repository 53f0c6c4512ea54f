// test_cuda_plugin.cpp — the CUDA backend is a plugin opened only when a CUDA device is used
// (kernels/plugin_loader.h), seen from the CPU side, in every build configuration:
//   * a CPU forward, backward and AdamW step maps no CUDA library (/proc/self/maps), checked in a fresh
//     process (this binary again, on a hidden case) since other tests in this binary ask for cuda:0;
//     in a build with the plugin, the same reading does see it once a CUDA device was asked for;
//   * `tapegrad info` and a 2-step CPU training keep a CPU-only build's peak RSS (measured on this machine,
//     GCC/clang Release, CPU-only: info 10 MB, the training 20 MB; the nvcc build before the plugin: 217 MB
//     and 232 MB, because libcudart/libcublas/libcublasLt were mapped). Bounds: 48 MB and 64 MB (sanitizer
//     builds, whose shadow memory alone is ~90 MB: 192 MB and 256 MB);
//   * TAPEGRAD_CUDA_PLUGIN naming no file: `--device cuda` fails with one line naming the file, and CPU
//     training in the same environment runs; a file dlopen refuses, or a library without the entry point,
//     is one line naming it too;
//   * the places the loader looks at, in order.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tapegrad.h"
#include "data/token_file.h"
#include "kernels/backend.h"
#include "kernels/plugin_loader.h"
#include "optim/adamw.h"
#include "tests/child_process.h"
#include "tests/sanitized.h"
#include "tests/test_data_helpers.h"
#include "tests/tool_runner.h"

using namespace tapegrad;
using tapegrad::testing::ChildResult;
using tapegrad::testing::cuda_libraries_mapped;
using tapegrad::testing::run_child;
using tapegrad::testing::self_executable;
namespace fs = std::filesystem;

namespace {

using tapegrad::testing::kSanitized;

constexpr long kInfoRssBoundKb = (kSanitized ? 192 : 48) * 1024;
constexpr long kTrainRssBoundKb = (kSanitized ? 256 : 64) * 1024;

// True when this build makes the plugin (the loader has places to look at).
bool build_has_plugin() { return !kernels::cuda_plugin_candidates().empty(); }

// One small CPU training step: an MLP's forward, backward and an AdamW update.
void cpu_training_step() {
  Generator gen(7);
  const Tensor x = randn({8, 4}, kFloat32, &gen), y = randn({8, 1}, kFloat32, &gen);
  Tensor w1 = randn({4, 16}, Options().requires_grad(), &gen), w2 = randn({16, 1}, Options().requires_grad(), &gen);
  optim::AdamW opt(std::vector<Tensor>{w1, w2}, optim::AdamWOptions(0.01));
  const Tensor loss = mean(pow(matmul(tanh(matmul(x, w1)), w2) - y, 2.0));
  loss.backward();
  opt.step();
  REQUIRE(std::isfinite(loss.item()));
  REQUIRE(w1.grad().defined());
}

// Runs one hidden case of this binary in a fresh process; it must pass.
ChildResult run_hidden_case(const std::string& tag, const std::string& log) {
  const tapegrad::data::testing::ScratchDir dir(log);
  ChildResult r = run_child({self_executable(), "--warn", "NoTests", tag}, {}, dir.file("child"));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.signal == 0);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.out, Catch::Contains("All tests passed"));
  return r;
}

// A token file of the corpus's first 20,000 bytes (vocabulary 256): training data without a tokenizer.
std::string byte_tokens(const tapegrad::data::testing::ScratchDir& dir) {
  const std::string corpus =
      tapegrad::data::testing::read_all(std::string(TAPEGRAD_SOURCE_DIR) + "/corpus/tinystories_head.txt");
  std::vector<uint32_t> ids(corpus.begin(), corpus.begin() + std::min<size_t>(corpus.size(), 20000));
  for (uint32_t& id : ids) id &= 0xff;
  const std::string path = dir.file("bytes.bin");
  tapegrad::data::write_token_file(path, ids, 256);
  return path;
}

std::vector<std::string> train_args(const std::string& tokens, const std::string& out, const std::string& device) {
  return {TAPEGRAD_TOOL_PATH, "train", "--train", tokens, "--context", "16", "--d-model", "16", "--layers", "1",
          "--heads", "2", "--d-ff", "32", "--batch-size", "4", "--steps", "2", "--threads", "1", "--out", out,
          "--device", device};
}

}  // namespace

// ---- hidden cases, run in a fresh process by the cases below ----

TEST_CASE("cuda plugin child: a CPU training step maps no CUDA library", "[.cuda_plugin_child_cpu]") {
  cpu_training_step();
  (void)kernels::device_memory(Device::cpu());  // the registry's other entry points, for the CPU
  kernels::reset_peak_device_memory(Device::cpu());
  const std::vector<std::string> mapped = cuda_libraries_mapped();
  for (const std::string& m : mapped) UNSCOPED_INFO("mapped: " << m);
  CHECK(mapped.empty());
  CHECK(kernels::cuda_plugin_path().empty());
}

TEST_CASE("cuda plugin child: asking for cuda:0 maps the plugin", "[.cuda_plugin_child_cuda]") {
  try {
    (void)kernels::backend(Device::cuda(0));  // no GPU here: the plugin loads, then finds no device
  } catch (const Error& e) {
    std::printf("cuda:0: %s\n", e.what());
  }
  const std::string loaded = kernels::cuda_plugin_path();
  std::printf("plugin loaded from: %s\n", loaded.empty() ? "(none)" : loaded.c_str());
  if (!loaded.empty()) {
    const std::vector<std::string> mapped = cuda_libraries_mapped();
    const bool plugin_mapped = std::any_of(mapped.begin(), mapped.end(), [](const std::string& m) {
      return fs::path(m).filename() == "libtapegrad_cuda.so";
    });
    CHECK(plugin_mapped);
  }
}

// ---- the tests ----

TEST_CASE("a CPU forward, backward and AdamW step maps no CUDA library", "[cuda-plugin]") {
  run_hidden_case("[.cuda_plugin_child_cpu]", "plugin_cpu");
  if (build_has_plugin()) {
    // The reading above can see the plugin: once cuda:0 is asked for, it is mapped (this build tree's plugin
    // loads on any machine with the CUDA runtime it was built against, GPU or not).
    const ChildResult r = run_hidden_case("[.cuda_plugin_child_cuda]", "plugin_cuda");
    CHECK_THAT(r.out, Catch::Contains("plugin loaded from: /"));
  }
}

TEST_CASE("the plugin loader's places, in order", "[cuda-plugin]") {
  const char* saved = std::getenv("TAPEGRAD_CUDA_PLUGIN");
  const std::string saved_value = saved != nullptr ? saved : "";
  ::unsetenv("TAPEGRAD_CUDA_PLUGIN");
  const std::vector<std::string> places = kernels::cuda_plugin_candidates();
  ::setenv("TAPEGRAD_CUDA_PLUGIN", "/somewhere/else/libtapegrad_cuda.so", 1);
  const std::vector<std::string> overridden = kernels::cuda_plugin_candidates();
  if (saved != nullptr) ::setenv("TAPEGRAD_CUDA_PLUGIN", saved_value.c_str(), 1);
  else ::unsetenv("TAPEGRAD_CUDA_PLUGIN");

  if (!build_has_plugin()) {
    CHECK(places.empty());  // nothing to look for: backend(cuda) says the build has no CUDA backend
    CHECK(overridden.empty());
    return;
  }
  INFO("places: " << Catch::Detail::stringify(places));
  REQUIRE(places.size() >= 4);
  const fs::path exe_dir = fs::path(self_executable()).parent_path();
  CHECK(places.front() == (exe_dir / "libtapegrad_cuda.so").string());  // next to the executable first
  // This binary lies in its build tree: that tree's plugin comes next, and it is there.
  CHECK(fs::path(places[1]).filename() == "libtapegrad_cuda.so");
  CHECK(fs::exists(places[1]));
  CHECK(places.back() == "libtapegrad_cuda.so");  // last, the dynamic loader's own search
  CHECK(overridden == std::vector<std::string>{"/somewhere/else/libtapegrad_cuda.so"});  // the variable alone
}

TEST_CASE("tool: tapegrad info and a 2-step CPU training keep a CPU-only build's peak RSS", "[cuda-plugin][tool]") {
  const tapegrad::data::testing::ScratchDir dir("plugin_rss");
  const ChildResult info = run_child({TAPEGRAD_TOOL_PATH, "info"}, {}, dir.file("info"));
  INFO("info stderr: " << info.err);
  REQUIRE(info.exit_code == 0);
  CHECK(info.max_rss_kb > 0);
  CHECK(info.max_rss_kb < kInfoRssBoundKb);

  const ChildResult train = run_child(train_args(byte_tokens(dir), dir.file("run"), "cpu"), {}, dir.file("train"));
  INFO("train stderr: " << train.err);
  REQUIRE(train.exit_code == 0);
  CHECK(train.max_rss_kb < kTrainRssBoundKb);
}

TEST_CASE("tool: TAPEGRAD_CUDA_PLUGIN naming no file: --device cuda fails with one line, the CPU trains",
          "[cuda-plugin][tool]") {
  const tapegrad::data::testing::ScratchDir dir("plugin_missing");
  const std::string tokens = byte_tokens(dir);
  const std::vector<std::pair<std::string, std::string>> env{
      {"TAPEGRAD_CUDA_PLUGIN", "/nonexistent/libtapegrad_cuda.so"}};

  const ChildResult cuda = run_child(train_args(tokens, dir.file("run_cuda"), "cuda"), env, dir.file("cuda"));
  INFO("stdout: " << cuda.out << "\nstderr: " << cuda.err);
  CHECK(cuda.signal == 0);
  CHECK(cuda.exit_code == 2);
  const std::vector<std::string> lines = tapegrad::testing::lines_of(cuda.err);
  REQUIRE(lines.size() == 1);
  if (build_has_plugin())
    CHECK(lines[0] == "tapegrad: --device cuda: device cuda:0: the CUDA backend could not be loaded (no "
                      "libtapegrad_cuda.so found; tried /nonexistent/libtapegrad_cuda.so)");
  else
    CHECK_THAT(lines[0], Catch::StartsWith("tapegrad: --device cuda: device cuda:0: this build of tapegrad has no "
                                           "CUDA backend"));
  CHECK_FALSE(fs::exists(dir.file("run_cuda")));

  const ChildResult cpu = run_child(train_args(tokens, dir.file("run_cpu"), "cpu"), env, dir.file("cpu"));
  INFO("cpu stderr: " << cpu.err);
  CHECK(cpu.exit_code == 0);
}

TEST_CASE("tool: a plugin file that cannot be opened, or is no tapegrad plugin, is one line naming it",
          "[cuda-plugin][tool]") {
  if (!build_has_plugin()) return;  // a build without the plugin never opens one (the case above)
  const tapegrad::data::testing::ScratchDir dir("plugin_broken");
  const std::string tokens = byte_tokens(dir);
  // An empty file: dlopen's own reason. A shared library without the entry point: libstdc++, mapped here.
  const std::string empty = dir.file("libtapegrad_cuda.so");
  tapegrad::data::testing::write_all(empty, "");
  std::string other_library;
  {
    std::ifstream maps("/proc/self/maps");
    for (std::string line; other_library.empty() && std::getline(maps, line);)
      if (line.find("/libstdc++.so") != std::string::npos) other_library = line.substr(line.find('/'));
  }
  REQUIRE_FALSE(other_library.empty());
  const std::pair<std::string, std::string> cases[] = {
      {empty, "device cuda:0: the CUDA backend could not be loaded (" + empty + ": "},
      {other_library, "device cuda:0: the CUDA backend could not be loaded (" + other_library +
                          ": it has no tapegrad_cuda_plugin_v1(): not a tapegrad CUDA plugin)"}};
  for (const auto& [plugin, message] : cases) {
    const ChildResult r =
        run_child(train_args(tokens, dir.file("run"), "cuda"), {{"TAPEGRAD_CUDA_PLUGIN", plugin}}, dir.file("cuda"));
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 2);
    const std::vector<std::string> lines = tapegrad::testing::lines_of(r.err);
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Catch::StartsWith("tapegrad: --device cuda: " + message));
  }
}
