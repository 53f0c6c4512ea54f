#!/usr/bin/env bash
# deps.sh — install what tapegrad needs from Debian's packages, and only what is missing.
# Idempotent: a second run installs nothing. Used by scripts/test.sh, scripts/run.sh, bench/run.sh.
# Usage: scripts/deps.sh [--bench] [--test]   (--bench: the PyTorch peers the benchmarks compare against;
#   --test: what scripts/test.sh adds: clang-19, libomp-19-dev, libclang-rt-19-dev, ccache, chromium)
set -euo pipefail

# libopenmpi-dev + openmpi-bin: data-parallel training (`mpirun -np N tapegrad train --distributed`,
# dist/, TAPEGRAD_MPI) and its tests; without them the build simply has no MPI communicator.
packages=(build-essential cmake pkg-config libopenblas-openmp-dev catch2 libfmt-dev libboost-program-options-dev
  libpcre2-dev nlohmann-json3-dev python3 python3-venv libtbb-dev libopenmpi-dev openmpi-bin)
for arg in "$@"; do
  case "$arg" in
    --bench) packages+=(python3-torch python3-numpy libtorch-dev) ;;
    # scripts/test.sh: the clang build, its OpenMP runtime, the sanitizer/libFuzzer runtimes, ccache
    # (scripts/ccache_env.sh: rebuilds and later clones compile only what changed), and chromium: the
    # headless browser that runs the `tapegrad dot --html` page (tests/html_stepper_check.py).
    --test) packages+=(clang-19 libomp-19-dev libclang-rt-19-dev ccache chromium) ;;
    *) echo "deps.sh: unknown argument $arg (use --bench and/or --test)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "deps.sh: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
$SUDO apt-get update -q >&2
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
