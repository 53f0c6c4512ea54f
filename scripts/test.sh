#!/usr/bin/env bash
# test.sh — the test command: on a fresh Debian machine it installs what is missing,
# builds tapegrad and runs the whole suite under ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)"
