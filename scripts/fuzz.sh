#!/usr/bin/env bash
# fuzz.sh [--build-only | --configure-only] [SECONDS] — runs every libFuzzer target of tests/fuzz/ for SECONDS
# each (default 60) and prints a table: target | executions | exec/s | coverage (cov / ft from libFuzzer's
# final stats) | crashes. --build-only configures and builds, and runs nothing (scripts/test.sh times the two
# apart); --configure-only only configures.
# Configures build-fuzz/ with clang 19, ASan+UBSan and TAPEGRAD_FUZZ=ON (cmake/fuzz.cmake), -O1 -g, builds
# with nice -n 19 and -j1 (TAPEGRAD_JOBS=N for more), runs each target on a scratch copy of its seed corpus
# (tests/fuzz/corpus/<target>/, left untouched), with tests/fuzz/dicts/<target>.dict when there is one,
# TAPEGRAD_JOBS targets at a time.
# TAPEGRAD_FUZZ_BUILD_DIR=DIR uses DIR instead of build-fuzz/ and TAPEGRAD_FUZZ_CMAKE_ARGS adds configure
# arguments: scripts/test.sh builds its clang ASan+UBSan stage this way, so that one build runs the whole
# suite and the fuzzers.
# Every crash-*/leak-*/timeout-*/oom-* input found is moved into tests/fuzz/regressions/<target>/ (replayed
# by ctest "fuzz replay: <target>" in every build from then on) for the engineer to inspect and fix.
# Exits 1 when any target found something. Logs: build-fuzz/fuzz-logs/<target>.log. See docs/fuzzing.md.
set -euo pipefail
build_only=0 configure_only=0
if [[ ${1:-} == --build-only ]]; then build_only=1; shift; fi
if [[ ${1:-} == --configure-only ]]; then configure_only=1; shift; fi
seconds=${1:-60}
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] ||
  { echo "usage: $0 [--build-only | --configure-only] [SECONDS per target, default 60]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/ccache_env.sh"
build=${TAPEGRAD_FUZZ_BUILD_DIR:-$root/build-fuzz}
[[ $build == /* ]] || build=$root/$build
read -r -a extra_cmake_args <<<"${TAPEGRAD_FUZZ_CMAKE_ARGS:-}"
jobs=${TAPEGRAD_JOBS:-1}
cxx=${TAPEGRAD_FUZZ_CXX:-clang++-19}
cc=${TAPEGRAD_FUZZ_CC:-clang-19}
command -v "$cxx" >/dev/null || { echo "fuzz.sh: $cxx not found (apt-get install clang-19 libclang-rt-19-dev libomp-19-dev)" >&2; exit 2; }

targets=()
for f in "$root"/tests/fuzz/fuzz_*.cpp; do
  t=$(basename "$f" .cpp); targets+=("${t#fuzz_}")
done

mkdir -p "$build"
echo "fuzz.sh: configuring and building $build (nice -n 19, -j$jobs) ..."
# -O1 -g: libFuzzer's usual trade of speed for compile time; assertions stay on (no NDEBUG).
nice -n 19 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DTAPEGRAD_SANITIZE=address,undefined -DTAPEGRAD_FUZZ=ON \
  -DTAPEGRAD_CUDA=OFF -DTAPEGRAD_BENCH=OFF "${extra_cmake_args[@]}" >"$build/fuzz-configure.log" 2>&1 ||
  { cat "$build/fuzz-configure.log"; exit 2; }
[[ $configure_only == 1 ]] && { echo "fuzz.sh: configured $build"; exit 0; }
nice -n 19 cmake --build "$build" -j"$jobs" --target "${targets[@]/#/fuzz_}" >"$build/fuzz-build.log" 2>&1 ||
  { tail -50 "$build/fuzz-build.log"; exit 2; }
if [[ $build_only == 1 ]]; then
  echo "fuzz.sh: built ${#targets[@]} targets in $build/fuzz/"
  exit 0
fi

logs=$build/fuzz-logs
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tapegrad-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$logs"
rows=()
found=0
fuzz_one() {
  local t=$1 work=$scratch/$1 dict=()
  mkdir -p "$work/corpus" "$work/artifacts"
  cp -r "$root/tests/fuzz/corpus/$t/." "$work/corpus/" 2>/dev/null || true
  [[ -f "$root/tests/fuzz/dicts/$t.dict" ]] && dict=("-dict=$root/tests/fuzz/dicts/$t.dict")
  # -timeout: one input taking 10 s is a finding; OMP_NUM_THREADS=1 as in ctest.
  (cd "$work" && OMP_NUM_THREADS=1 nice -n 19 "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 \
     -rss_limit_mb=2048 -timeout=10 -artifact_prefix="$work/artifacts/" "${dict[@]}" "$work/corpus") \
     >"$logs/$t.log" 2>&1 || true
}
# TAPEGRAD_JOBS targets at a time (each libFuzzer process is one thread).
running=0
for t in "${targets[@]}"; do
  echo "fuzz.sh: fuzz_$t for ${seconds}s ..."
  fuzz_one "$t" &
  running=$((running + 1))
  if [[ $running -ge $jobs ]]; then wait -n || true; running=$((running - 1)); fi
done
wait
for t in "${targets[@]}"; do
  work=$scratch/$t
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$logs/$t.log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$logs/$t.log" | tail -1 || true)
  crashes=0
  for a in "$work"/artifacts/crash-* "$work"/artifacts/leak-* "$work"/artifacts/timeout-* "$work"/artifacts/oom-*; do
    [[ -f "$a" ]] || continue
    mkdir -p "$root/tests/fuzz/regressions/$t"
    mv "$a" "$root/tests/fuzz/regressions/$t/"
    crashes=$((crashes + 1))
  done
  # libFuzzer stops at the first crash; a run that ended without stats (e.g. killed) also counts.
  if [[ -z "$execs" && $crashes -eq 0 ]]; then crashes="?"; fi
  [[ "$crashes" != 0 ]] && found=1
  rows+=("| $t | ${execs:-?} | ${rate:-?} | ${cov:-?} | $crashes |")
done

echo
echo "fuzz.sh: $(date -u +%Y-%m-%d), ${seconds} s per target, $(nproc) cores, logs in $logs"
echo "| target | executions | exec/s | coverage | crashes |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
if [[ $found -ne 0 ]]; then
  echo "fuzz.sh: crashes were found: the inputs are in tests/fuzz/regressions/<target>/ (logs in $logs)" >&2
  exit 1
fi
