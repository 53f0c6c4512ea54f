// run_dir.cpp — the run directory's layout, checkpoint listing and pruning (see run_dir.h).
#include "lm/run_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "kernels/error.h"

namespace fs = std::filesystem;

namespace tapegrad::lm {

namespace {

// "step_00000100.safetensors" → 100; anything else (best.safetensors, temp files) → nullopt.
std::optional<int64_t> step_of(const std::string& name) {
  constexpr std::string_view prefix = "step_", suffix = ".safetensors";
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix))
    return std::nullopt;
  const char* b = name.data() + prefix.size();
  const char* e = name.data() + name.size() - suffix.size();
  if (*b < '0' || *b > '9') return std::nullopt;  // from_chars takes a sign: "step_-0" is no step
  int64_t step = -1;
  auto [p, ec] = std::from_chars(b, e, step);
  if (ec != std::errc() || p != e || step < 0) return std::nullopt;
  return step;
}

}  // namespace

std::string checkpoints_dir(const std::string& run_dir) { return (fs::path(run_dir) / "checkpoints").string(); }

std::string step_checkpoint_path(const std::string& run_dir, int64_t step) {
  return (fs::path(checkpoints_dir(run_dir)) / fmt::format("step_{:08d}.safetensors", step)).string();
}

std::string best_checkpoint_path(const std::string& run_dir) {
  return (fs::path(checkpoints_dir(run_dir)) / "best.safetensors").string();
}

std::vector<std::pair<int64_t, std::string>> list_step_checkpoints(const std::string& run_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  const fs::path dir = checkpoints_dir(run_dir);
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    if (auto step = step_of(entry.path().filename().string())) out.emplace_back(*step, entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> newest_checkpoint(const std::string& run_dir) {
  auto all = list_step_checkpoints(run_dir);
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

void prune_checkpoints(const std::string& run_dir, int keep_last) {
  auto all = list_step_checkpoints(run_dir);
  const size_t keep = size_t(std::max(keep_last, 1));
  std::error_code ec;
  for (size_t i = 0; i + keep < all.size(); ++i) fs::remove(all[i].second, ec);
  // Temp files of atomic writes that a killed process left behind ("<target>.tmp.XXXXXX").
  for (const auto& entry : fs::directory_iterator(checkpoints_dir(run_dir), ec))
    if (entry.path().filename().string().find(".safetensors.tmp.") != std::string::npos) fs::remove(entry.path(), ec);
}

void prepare_run_dir(const std::string& run_dir) {
  TG_CHECK(!run_dir.empty(), "the run directory (--out) is empty");
  std::error_code ec;
  fs::create_directories(checkpoints_dir(run_dir), ec);
  TG_CHECK(!ec, "cannot create the run directory '{}': {}", run_dir, ec.message());
  const std::string probe = (fs::path(run_dir) / ".write_test").string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  TG_CHECK(fd >= 0, "the run directory '{}' is not writable: {}", run_dir, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string run_dir_of_checkpoint(const std::string& checkpoint_path) {
  const fs::path parent = fs::path(checkpoint_path).parent_path();
  if (parent.filename() != "checkpoints") return "";
  const fs::path run = parent.parent_path();
  return run.empty() ? std::string(".") : run.string();
}

ResolvedCheckpoint resolve_checkpoint(const std::string& given) {
  std::error_code ec;
  const fs::file_status st = fs::status(given, ec);
  TG_CHECK(fs::exists(st), "checkpoint '{}' does not exist", given);
  if (!fs::is_directory(st)) return {given, ""};
  // The run directory, also when its checkpoints/ folder was given.
  fs::path run = given;
  if (run.filename().empty()) run = run.parent_path();  // "run/" → "run"
  if (run.filename() == "checkpoints" && !fs::is_directory(run / "checkpoints", ec)) run = run.parent_path();
  if (run.empty()) run = ".";
  const std::string best = best_checkpoint_path(run.string());
  if (fs::is_regular_file(best, ec)) return {best, fmt::format("{} (the run's best: lowest validation loss)", best)};
  if (auto newest = newest_checkpoint(run.string()))
    return {*newest, fmt::format("{} (the run's newest; it has no best.safetensors)", *newest)};
  throw Error(fmt::format("'{}' is a directory but holds no checkpoint: neither {} nor a checkpoints/step_*.safetensors "
                          "(a run directory of `tapegrad train` or `tapegrad import` has them)",
                          given, best));
}

}  // namespace tapegrad::lm
