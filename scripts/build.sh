#!/usr/bin/env bash
# build.sh — configure and build tapegrad (Release) into build/. Extra arguments go to cmake.
# The configure step runs only when build/ has no cache yet or the arguments differ from the last
# configure's (kept in build/.configure-args); otherwise cmake --build alone, which re-runs the
# configure by itself when a CMakeLists.txt changed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache_env.sh
args="-DCMAKE_BUILD_TYPE=Release $*"
if [[ ! -f build/CMakeCache.txt || "$(cat build/.configure-args 2>/dev/null)" != "$args" ]]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  echo "$args" >build/.configure-args
fi
cmake --build build -j"$(nproc)"
