#!/usr/bin/env bash
# consumer_test.sh — checks tapegrad as another C++ project sees it: builds it in build-install/
# (Release, no benchmarks, no tests), installs it into a temporary prefix, then builds and runs
# examples/mlp and examples/tiny_lm against that prefix with find_package(tapegrad) only, checks
# that their loss fell, that the installed `tapegrad` tool runs, and that tapegrad.pc works
# (a program compiled with nothing but `pkg-config --cflags --libs`).
# Usage: scripts/consumer_test.sh [extra cmake args, e.g. -DTAPEGRAD_CUDA=OFF]
# Environment: TAPEGRAD_JOBS (build jobs, default nproc), TAPEGRAD_INSTALL_BUILD_DIR (default build-install),
# TAPEGRAD_INSTALL_PREBUILT=1 (install from that directory as it is configured: no configure step).
# One status line per stage; the logs of a failing stage are printed, the others stay quiet.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build="${TAPEGRAD_INSTALL_BUILD_DIR:-build-install}"
jobs="${TAPEGRAD_JOBS:-$(nproc)}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
mkdir -p "$tmp/logs"

# stage NAME COMMAND... (scripts/stages.sh): one status line, the output in a log under $tmp/logs,
# shown when the command fails (which ends the script). log_of NAME: that log's path.
STAGE_LOG_DIR=$tmp/logs
source scripts/stages.sh
log_of() { echo "$STAGE_LOG_DIR/${1//[^A-Za-z0-9_.+-]/_}.log"; }

# check_loss NAME LOG: the program's last line must be "first loss X last loss Y" with Y < X.
check_loss() {
  local name=$1 log=$2 line
  line=$(tail -n 1 "$log")
  if ! [[ $line =~ ^first\ loss\ ([0-9.eE+-]+)\ last\ loss\ ([0-9.eE+-]+)$ ]]; then
    echo "consumer_test: FAIL  $name: last line is not 'first loss X last loss Y': '$line'" >&2
    exit 1
  fi
  local first=${BASH_REMATCH[1]} last=${BASH_REMATCH[2]}
  if ! awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f) }'; then
    echo "consumer_test: FAIL  $name: the loss did not fall (first $first, last $last)" >&2
    exit 1
  fi
  echo "consumer_test: ok    $name: loss fell from $first to $last"
}

# build_example NAME: configure + build examples/NAME against the prefix, run it, check its loss.
build_example() {
  local name=$1
  stage "configure example $name" cmake -S examples/"$name" -B "$tmp/$name" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix"
  stage "build example $name" cmake --build "$tmp/$name" -j"$jobs"
  stage "run example $name" "$tmp/$name/$name"
  check_loss "$name" "$(log_of "run example $name")"
}

if [[ ${TAPEGRAD_INSTALL_PREBUILT:-0} == 1 ]]; then
  # scripts/test.sh: install what its GCC stage built in build/ (configured there, not here).
  [[ -f $build/CMakeCache.txt ]] || { echo "consumer_test: FAIL  $build is not a configured build" >&2; exit 1; }
  stage "build tapegrad (up to date)" cmake --build "$build" -j"$jobs"
else
  stage "configure tapegrad in $build" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_BENCH=OFF \
    -DBUILD_TESTING=OFF "$@"
  stage "build tapegrad" cmake --build "$build" -j"$jobs"
fi
stage "install into a temporary prefix" cmake --install "$build" --prefix "$prefix"

# What a user relies on is where it should be (libdir: lib, or lib/<multiarch> for a /usr prefix).
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")
missing=()
for f in include/tapegrad/autograd/tapegrad.h include/tapegrad/kernels/backend.h include/tapegrad/nn/transformer_lm.h \
         include/tapegrad/optim/adamw.h include/tapegrad/data/tokenizer.h include/tapegrad/lm/trainer.h \
         bin/tapegrad "$libdir"/cmake/tapegrad/tapegradConfig.cmake "$libdir"/cmake/tapegrad/tapegradConfigVersion.cmake \
         "$libdir"/cmake/tapegrad/tapegradTargets.cmake "$libdir"/pkgconfig/tapegrad.pc "$libdir"/libtapegrad.a; do
  [[ -e "$prefix/$f" ]] || missing+=("$f")
done
if ((${#missing[@]})); then
  echo "consumer_test: FAIL  installed files missing under the prefix: ${missing[*]}" >&2
  exit 1
fi
echo "consumer_test: ok    installed layout (headers, libraries, tool, CMake package, tapegrad.pc)"

stage "installed tool: tapegrad info" "$prefix/bin/tapegrad" info
stage "installed tool: tapegrad --help" "$prefix/bin/tapegrad" --help

# pkg-config: the flags, then a program built with them alone (static libraries: --static).
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
stage "pkg-config --cflags --libs tapegrad" pkg-config --cflags --libs tapegrad
stage "pkg-config: compile examples/mlp with its flags" \
  bash -c "c++ -O2 -o '$tmp/mlp_pc' examples/mlp/main.cpp \$(pkg-config --static --cflags --libs tapegrad)"
stage "pkg-config: run that program" "$tmp/mlp_pc"
check_loss "mlp (pkg-config build)" "$(log_of "pkg-config: run that program")"

build_example mlp
build_example tiny_lm
echo "consumer_test: passed (prefix $prefix, removed on exit)"
