// shared_fixture.h — where a test finds a reference nobody here wrote: ../shared beside the clone
// (golden float64 LMs, CS336's fixtures, llama2.c's models, corpora; see ../shared/data/README.md).
//
// A user's clone has no ../shared. A test that needs a missing fixture then ends its process with
// exit status 77, which ctest reports as "Skipped" (SKIP_RETURN_CODE 77 on every suite), after one line
// naming the file — except under TAPEGRAD_REQUIRE_SHARED=1 (.ci/run sets it), where the test FAILS:
// CI must never skip them. Call it inside a TEST_CASE (never at namespace scope: the whole binary would
// exit before any test ran). Running the test binary by hand without ctest, the first skip ends the run.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace tapegrad::testing {

inline bool shared_fixtures_required() {
  const char* v = std::getenv("TAPEGRAD_REQUIRE_SHARED");
  return v != nullptr && std::string(v) == "1";
}

// The path of `relative` (a file or a directory) under ../shared; skips (exit 77) or fails when missing.
inline std::string shared_path(const std::string& relative) {
  const std::string path = std::string(TAPEGRAD_SHARED_DIR) + "/" + relative;
  if (std::filesystem::exists(path)) return path;
  if (shared_fixtures_required())
    throw std::runtime_error("missing fixture " + path + " (TAPEGRAD_REQUIRE_SHARED=1: it must be there)");
  std::printf("SKIP: this test needs %s, and ../shared is not beside this clone\n", path.c_str());
  std::fflush(stdout);
  std::_Exit(77);  // not exit(): no leak report or static destructors for a test that did not run
}

}  // namespace tapegrad::testing
