#!/usr/bin/env bash
# run.sh — the main job on its embedded default: installs what is missing, builds, and runs
# `tapegrad demo` (fits a small MLP on the tape, prints its tape, gradchecks it in float64).
# Extra arguments go to the tool, e.g. scripts/run.sh dot --out example.dot
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
source scripts/blas_env.sh
exec build/tools/tapegrad "$@"
