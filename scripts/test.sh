#!/usr/bin/env bash
# test.sh — the test command (and CI's, through .ci/run): on a fresh Debian machine it installs what is
# missing, builds tapegrad and runs every test suite, one status line per stage (logs in build/logs/,
# a failing stage's log shown), then each stage's time. The stages:
#   1. dependencies     Debian packages (scripts/deps.sh --test adds clang-19 and its OpenMP/sanitizer runtimes)
#   2. GCC build        build/ (Release, -Werror); nvcc, where installed, compiles the CUDA backend too
#   3. GCC tests        ctest in build/ (without a GPU the CUDA cases report "Skipped"; the MPI tests, "dist: ...",
#                       run on 2 ranks with mpirun on loopback); one test compares our
#                       tokenizer.json with Hugging Face `tokenizers` from PyPI (build/hf-venv; skipped offline)
#   4. emulated CUDA    the CUDA backend's kernels built as host C++ on HIP-CPU (../shared/third_party/hip-cpu)
#                       in build-emulated/ at -O1 (the kernels' own code is what is tested there, not the host
#                       compiler's optimiser; -O1 takes a third less time to compile them), and its cross-backend
#                       suite (tests/cuda/) against the CPU
#   5. clang ASan+UBSan build-sanitize/: Debian's clang-19 and libomp, -Werror, AddressSanitizer (LeakSanitizer on)
#                       + UndefinedBehaviorSanitizer at -O1 -g, and the libFuzzer targets (TAPEGRAD_FUZZ=ON):
#                       one build that checks clang's warnings, runs the whole suite under the sanitizers and
#                       fuzzes (it replaced three: GCC+ASan, clang, and the fuzzers' own; docs/testing.md)
#   6. ThreadSanitizer  build-tsan/ (clang-19, TAPEGRAD_SANITIZE=thread, -O1): every test whose name holds "thread"
#                       or "parallel" (the threaded kernels at 1 vs 3 threads, the parallel tokenizer; not the
#                       MPI tests), with OpenMP's Archer tool so that TSan sees OpenMP's barriers
#                       (docs/reliability.md); tapegrad_tests is built from only the files that hold such tests
#   7. fuzzing          every target of tests/fuzz/ for TAPEGRAD_FUZZ_SECONDS (default 20) seconds, two at a time,
#                       from build-sanitize/ (scripts/fuzz.sh; docs/fuzzing.md)
#   8. consumer         install build/ into a temporary prefix, build examples/ with find_package(tapegrad) and
#                       with pkg-config, run them (scripts/consumer_test.sh; scripts/deb_test.sh tests the .deb)
# TAPEGRAD_TEST_STAGES=emulated,sanitize,tsan,fuzz,consumer (default: all) picks stages 4–8 (1–3 always run;
# fuzz alone configures and builds build-sanitize/ as far as the fuzzers need);
# TAPEGRAD_SKIP_EMULATED=1 leaves stage 4 out.
# On a clone with no ../shared beside it (a user's), the tests that need a reference from there (golden LMs,
# CS336 fixtures, llama2.c's models; tests/shared_fixture.h) report Skipped and stage 4 is left out (HIP-CPU
# lives there too); the last lines say how many tests passed, failed and were skipped, and why.
# TAPEGRAD_REQUIRE_SHARED=1 (.ci/run sets it) turns every such skip into a failure: CI never skips them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/stages.sh
source scripts/ccache_env.sh
# OpenBLAS on this CPU's vector kernels: on a CPU that OpenBLAS 0.3.21 misdetects the tool would also print a
# line of advice on stderr, which the tool tests (one stderr line per error) would count as a second line.
source scripts/blas_env.sh
jobs=$(nproc)
stages=${TAPEGRAD_TEST_STAGES:-all}
want() { [[ $stages == all || ",$stages," == *",$1,"* ]]; }
hip_cpu="$(pwd)/../shared/third_party/hip-cpu"

# Configure a build directory once (again only when its cache is missing); cmake --build re-runs the
# configure step by itself when a CMakeLists.txt changed.
configure() {
  local dir=$1
  shift
  [[ -f $dir/CMakeCache.txt ]] || cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@"
}
# ctest in a build directory; its passed/failed/skipped counts and skip reasons go to the tally that the
# last lines report (scripts/ctest_tally.py).
tally=$STAGE_LOG_DIR/tests_tally.jsonl
mkdir -p "$STAGE_LOG_DIR" && rm -f "$tally"
ctest_in() {
  local dir=$1 rc=0
  shift
  (cd "$dir" && ctest --output-on-failure -j"$jobs" "$@") 2>&1 | tee "$dir/ctest_output.txt" || rc=$?
  python3 scripts/ctest_tally.py add "$dir" "$dir/ctest_output.txt" "$tally" || true
  return "$rc"
}
hf_venv() {
  [[ -x build/hf-venv/bin/python3 ]] && return 0
  if ! (python3 -m venv build/hf-venv && timeout 300 build/hf-venv/bin/pip install -q tokenizers); then
    echo "could not install Hugging Face tokenizers into build/hf-venv: its test will be skipped"
    rm -rf build/hf-venv
  fi
  return 0
}

stage "dependencies (Debian packages)" scripts/deps.sh --test
stage "GCC build (build/)" scripts/build.sh -DTAPEGRAD_WERROR=ON
stage "HF tokenizers venv (build/hf-venv)" hf_venv
stage "GCC tests (build/)" ctest_in build

if ! want emulated || [[ ${TAPEGRAD_SKIP_EMULATED:-0} == 1 ]]; then
  stage_skip "emulated CUDA" "TAPEGRAD_TEST_STAGES / TAPEGRAD_SKIP_EMULATED"
elif [[ ! -f $hip_cpu/include/hip/hip_runtime.h ]]; then
  if [[ ${TAPEGRAD_REQUIRE_SHARED:-0} == 1 ]]; then
    echo "test.sh: no HIP-CPU at $hip_cpu, and TAPEGRAD_REQUIRE_SHARED=1: the emulated CUDA suite must run" >&2
    exit 1
  fi
  stage_skip "emulated CUDA" "no HIP-CPU at ../shared/third_party/hip-cpu (../shared is not beside this clone)"
else
  stage "emulated CUDA build (build-emulated/)" eval 'configure build-emulated -DTAPEGRAD_CUDA_EMULATED=ON \
    -DTAPEGRAD_HIP_CPU_DIR="$hip_cpu" -DTAPEGRAD_BENCH=OFF -DTAPEGRAD_WERROR=ON -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" &&
    cmake --build build-emulated --target tapegrad_cuda_tests -j"$jobs"'
  stage "emulated CUDA tests (build-emulated/)" ctest_in build-emulated -L cuda
fi

# One clang build for three jobs: its -Werror compile checks clang's warnings, its ctest runs the whole suite
# under ASan+UBSan, and stage 7 fuzzes with its libFuzzer targets (scripts/fuzz.sh configures it).
sanitize_dir=build-sanitize
if want sanitize; then
  stage "clang-19 ASan+UBSan build (build-sanitize/)" eval 'TAPEGRAD_FUZZ_BUILD_DIR=$sanitize_dir \
    TAPEGRAD_FUZZ_CMAKE_ARGS="-DTAPEGRAD_WERROR=ON" scripts/fuzz.sh --configure-only &&
    cmake --build $sanitize_dir -j"$jobs"'
  stage "clang-19 ASan+UBSan tests (build-sanitize/)" ctest_in $sanitize_dir
else
  stage_skip "clang-19 ASan+UBSan" "TAPEGRAD_TEST_STAGES"
fi

if want tsan; then
  # Archer (libomp's OMPT tool for TSan, in libomp-19-dev) tells TSan about OpenMP's barriers and joins;
  # without it every parallel region would be reported. halt_on_error: the first race fails the test;
  # ignore_noninstrumented_modules and tests/tsan_libomp.supp: libomp's own thread start-up (see the file).
  archer=/usr/lib/llvm-19/lib/libarcher.so
  tsan_tests() {
    [[ -f $archer ]] || { echo "no $archer (apt-get install libomp-19-dev)"; return 1; }
    OMP_TOOL_LIBRARIES=$archer \
      TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ignore_noninstrumented_modules=1 suppressions=$(pwd)/tests/tsan_libomp.supp" \
      ctest_in build-tsan -R "thread|parallel" -E "^dist: "
  }
  # tapegrad_tests of only the files with a TEST_CASE that the -R above selects (tests/CMakeLists.txt).
  stage "ThreadSanitizer build (build-tsan/)" eval 'CC=clang-19 CXX=clang++-19 configure build-tsan \
    -DTAPEGRAD_SANITIZE=thread -DTAPEGRAD_CUDA=OFF -DTAPEGRAD_BENCH=OFF -DTAPEGRAD_WERROR=ON \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DTAPEGRAD_TEST_CASES_MATCHING="TEST_CASE\\(\"[^\"]*(thread|parallel)" &&
    cmake --build build-tsan --target tapegrad_tests tapegrad_tool -j"$jobs"'
  stage "ThreadSanitizer tests (build-tsan/)" tsan_tests
else
  stage_skip "ThreadSanitizer" "TAPEGRAD_TEST_STAGES"
fi

if want fuzz; then
  fuzz_seconds=${TAPEGRAD_FUZZ_SECONDS:-20}
  stage "fuzzing, ${fuzz_seconds}s per target (build-sanitize/)" env TAPEGRAD_JOBS="$jobs" \
    TAPEGRAD_FUZZ_BUILD_DIR=$sanitize_dir TAPEGRAD_FUZZ_CMAKE_ARGS="-DTAPEGRAD_WERROR=ON" scripts/fuzz.sh "$fuzz_seconds"
else
  stage_skip "fuzzing" "TAPEGRAD_TEST_STAGES"
fi

if want consumer; then
  stage "install + examples (find_package)" env TAPEGRAD_INSTALL_BUILD_DIR=build TAPEGRAD_INSTALL_PREBUILT=1 \
    scripts/consumer_test.sh
else
  stage_skip "install + examples" "TAPEGRAD_TEST_STAGES"
fi

stage_summary
echo "all stages passed; logs in $STAGE_LOG_DIR/"
# The closing line: every ctest stage's tests added up, after the reasons for what was skipped.
python3 scripts/ctest_tally.py report "$tally"
