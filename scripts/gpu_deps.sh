#!/usr/bin/env bash
# gpu_deps.sh — run HERE (a Debian 12 machine with apt), before a session's GPU calls: downloads the
# Debian packages the build needs into .gpudeps/ (git-ignored, ~26 MB), because the GPU machine has
# nvcc, cuBLAS and CMake but no Debian -dev packages and no network. Pass `carry: [".gpudeps"]` to the
# device tool's run; scripts/gpu_check.sh unpacks them there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpudeps
cd .gpudeps
apt-get download libfmt-dev libfmt9 libopenblas-openmp-dev libopenblas0-openmp libopenblas-dev catch2 \
  libboost-program-options1.74-dev libboost-program-options1.74.0 libboost1.74-dev libpcre2-dev libpcre2-8-0 \
  libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 nlohmann-json3-dev libgomp1 libgfortran5 2>&1 | tail -1
# The PyTorch peer of the GPU benchmark (the device machine has no ../shared).
cp ../../shared/bench/torch_lm_modern.py . 2>/dev/null || echo "gpu_deps.sh: no ../shared/bench/torch_lm_modern.py: the benchmark will run without its peer" >&2
du -sh .
