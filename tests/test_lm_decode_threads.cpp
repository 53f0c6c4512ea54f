// test_lm_decode_threads.cpp — the default thread count of batch-1 decoding (lm/decode_threads.h): one thread for
// a small model, more as the model grows, never more than the cores not already busy (the load average), never
// fewer than one; OMP_NUM_THREADS, when set, is taken as it is.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "lm/decode_threads.h"

using namespace tapegrad;

TEST_CASE("decode threads: one for a small model, more as it grows, capped by the idle cores", "[lm][threads]") {
  const double k = lm::kParametersPerThread;
  // Small models (stories260K, the micro and small presets): one thread, however many cores are idle.
  for (double p : {260e3, 361e3, 3.4e6, 1.99 * k}) {
    INFO(p);
    CHECK(lm::decode_threads(p, 2, 0.0) == 1);
    CHECK(lm::decode_threads(p, 64, 0.0) == 1);
  }
  // Larger: one thread per kParametersPerThread weights, up to the cores.
  CHECK(lm::decode_threads(2 * k, 16, 0.0) == 2);
  CHECK(lm::decode_threads(5.5 * k, 16, 0.0) == 5);
  CHECK(lm::decode_threads(1000 * k, 16, 0.0) == 16);
  CHECK(lm::decode_threads(1000 * k, 2, 0.0) == 2);
  // A busy machine: the cores less the load average (rounded), at least one.
  CHECK(lm::decode_threads(1000 * k, 16, 3.2) == 13);
  CHECK(lm::decode_threads(1000 * k, 16, 3.6) == 12);
  CHECK(lm::decode_threads(1000 * k, 2, 0.4) == 2);
  CHECK(lm::decode_threads(1000 * k, 2, 0.6) == 1);
  CHECK(lm::decode_threads(1000 * k, 2, 11.0) == 1);  // issue 38's machine: load 11 on 2 cores
  CHECK(lm::decode_threads(4 * k, 16, 14.0) == 2);
  // Nonsense in, a sane count out.
  CHECK(lm::decode_threads(-1, 0, -5) == 1);
  CHECK(lm::decode_threads(1000 * k, 4, -5) == 4);
}

TEST_CASE("decode threads: this machine's load average is read, OMP_NUM_THREADS is taken as it is", "[lm][threads]") {
  const std::optional<double> load = lm::load_average();
  REQUIRE(load.has_value());  // Linux: /proc/loadavg
  CHECK(*load >= 0);
  // ctest runs every test with OMP_NUM_THREADS=1; here it is set either way, to a count the rule would not pick.
  const char* before = std::getenv("OMP_NUM_THREADS");
  const std::string saved = before ? before : "";
  ::setenv("OMP_NUM_THREADS", "1", 1);
  const int threads = num_threads();
  CHECK(lm::decode_threads_here(1000 * lm::kParametersPerThread) == threads);
  if (before) ::setenv("OMP_NUM_THREADS", saved.c_str(), 1);
  else ::unsetenv("OMP_NUM_THREADS");
  const int here = lm::decode_threads_here(260e3);
  CHECK(here == (before ? threads : 1));
}
