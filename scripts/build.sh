#!/usr/bin/env bash
# build.sh — configure and build tapegrad (Release) into build/. Extra arguments go to cmake.
#   scripts/build.sh            everything: library, tool, all test suites, benchmarks, learn programs
#   scripts/build.sh --learn    the learner build (docs/learn/README.md): the library, the tool, the chapters'
#                               programs and the tests they name (TAPEGRAD_LEARN=ON, target `learn`)
# The configure step runs only when build/ has no cache yet or the arguments differ from the last
# configure's (kept in build/.configure-args); otherwise cmake --build alone, which re-runs the
# configure by itself when a CMakeLists.txt changed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache_env.sh
learn=OFF target=()
if [[ ${1:-} == --learn ]]; then
  learn=ON target=(--target learn)
  shift
fi
args="-DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_LEARN=$learn $*"
if [[ ! -f build/CMakeCache.txt || "$(cat build/.configure-args 2>/dev/null)" != "$args" ]]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_LEARN=$learn "$@" >/dev/null
  echo "$args" >build/.configure-args
fi
cmake --build build -j"$(nproc)" "${target[@]}"
