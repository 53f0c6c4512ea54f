// fuzz_run_dir.cpp — libFuzzer target: the run directory's readers (lm/metrics_log.h, lm/run_dir.h).
// The input is split at its first NUL byte: before it a metrics.jsonl, after it newline-separated file
// names put into checkpoints/. Asserts: from_json_line throws only tapegrad::Error, and a record it
// reads survives to_json_line → from_json_line (finite numbers exactly, non-finite ones as NaN; an eval record's
// per-task losses in order);
// reopening the log with MetricsLog(path, keep_until_step) keeps exactly the records with step ≤ the
// step that from_json_line reads from each complete line (none when that step is negative) and counts
// every other complete line as damaged; list_step_checkpoints lists only names of the form
// step_<N>.safetensors, N ≥ 0, sorted by step.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "kernels/error.h"
#include "lm/metrics_log.h"
#include "lm/run_dir.h"

using namespace tapegrad;
using namespace tapegrad::lm;

namespace {

bool same_number(double read, double again) {
  return std::isfinite(read) ? again == read : std::isnan(again);
}

void check_round_trip(const MetricRecord& r) {
  const MetricRecord a = from_json_line(to_json_line(r));
  FUZZ_ASSERT(a.kind == r.kind && a.step == r.step && a.tokens == r.tokens, "kind, step or tokens changed");
  FUZZ_ASSERT(same_number(r.wall_s, a.wall_s), "wall_s changed in the round trip");
  if (r.kind == MetricRecord::Kind::Train) {
    FUZZ_ASSERT(same_number(r.loss, a.loss) && same_number(r.lr, a.lr) && same_number(r.grad_norm, a.grad_norm) &&
                    same_number(r.tokens_per_s, a.tokens_per_s),
                "a train value changed in the round trip");
  } else {
    FUZZ_ASSERT(same_number(r.val_loss, a.val_loss) && same_number(r.val_perplexity, a.val_perplexity) &&
                    a.val_tokens == r.val_tokens,
                "an eval value changed in the round trip");
    FUZZ_ASSERT(a.val_loss_by_group.size() == r.val_loss_by_group.size(), "a task's loss was lost in the round trip");
    for (size_t i = 0; i < r.val_loss_by_group.size(); ++i)
      FUZZ_ASSERT(a.val_loss_by_group[i].first == r.val_loss_by_group[i].first &&
                      same_number(r.val_loss_by_group[i].second, a.val_loss_by_group[i].second),
                  "a task's loss changed in the round trip");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static fuzz::ScratchDir scratch;
  const fuzz::Split parts = fuzz::split_at(fuzz::as_view(data, size), '\0');

  // metrics.jsonl: every complete line on its own, then the whole file reopened.
  std::vector<int64_t> steps;  // of the complete lines that read as records
  size_t damaged = 0;          // complete lines that do not
  const std::string_view log = parts.first;
  for (size_t at = 0; at < log.size();) {
    const size_t nl = log.find('\n', at);
    if (nl == std::string_view::npos) break;  // a torn last line is not read
    const std::string line(log.substr(at, nl - at));
    at = nl + 1;
    try {
      const MetricRecord r = from_json_line(line);
      steps.push_back(r.step);
      check_round_trip(r);
    } catch (const Error&) {
      ++damaged;
    }
  }
  const int64_t keep_until = steps.empty() ? 0 : steps[steps.size() / 2];
  const std::string log_path = scratch.write("metrics.jsonl", log);
  {
    const MetricsLog reopened(log_path, keep_until);
    size_t kept = 0;
    for (int64_t s : steps) kept += s <= keep_until ? 1 : 0;
    if (keep_until < 0) kept = 0;  // a negative keep_until_step starts an empty log
    FUZZ_ASSERT(reopened.records().size() == kept, "MetricsLog kept another number of records");
    for (const MetricRecord& r : reopened.records()) FUZZ_ASSERT(r.step <= keep_until, "a later record was kept");
    FUZZ_ASSERT(keep_until < 0 || reopened.damaged_lines() == int64_t(damaged), "MetricsLog counted another number of "
                "damaged lines");
  }

  // checkpoints/: the listing reads only the names.
  const std::string run = scratch.file("run");
  std::error_code ec;
  fs::remove_all(run, ec);
  fs::create_directories(checkpoints_dir(run));
  std::vector<std::pair<int64_t, std::string>> expected;
  const std::string_view names = parts.second;
  for (size_t at = 0; at < names.size();) {
    size_t nl = names.find('\n', at);
    if (nl == std::string_view::npos) nl = names.size();
    const std::string name(names.substr(at, nl - at));
    at = nl + 1;
    if (name.empty() || name == "." || name == ".." || name.size() > 200 ||
        name.find_first_of(std::string("/\0", 2)) != std::string::npos || fs::exists(fs::path(checkpoints_dir(run)) / name))
      continue;
    const std::string file = (fs::path(checkpoints_dir(run)) / name).string();
    std::FILE* f = std::fopen(file.c_str(), "wb");
    if (!f) continue;
    std::fclose(f);
    // step_<decimal digits, fitting int64>.safetensors
    constexpr std::string_view prefix = "step_", suffix = ".safetensors";
    if (name.size() > prefix.size() + suffix.size() && name.starts_with(prefix) && name.ends_with(suffix)) {
      const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
      bool ok = digits.find_first_not_of("0123456789") == std::string::npos;
      const size_t first = digits.find_first_not_of('0');
      const std::string significant = first == std::string::npos ? "0" : digits.substr(first);
      ok = ok && (significant.size() < 19 || (significant.size() == 19 && significant <= "9223372036854775807"));
      if (ok) expected.emplace_back(std::stoll(significant), file);
    }
  }
  std::sort(expected.begin(), expected.end());
  const auto listed = list_step_checkpoints(run);
  FUZZ_ASSERT(listed == expected, "list_step_checkpoints listed " + std::to_string(listed.size()) +
                                      " checkpoints, expected " + std::to_string(expected.size()));
  return 0;
}
