#!/usr/bin/env bash
# test.sh — the test command: on a fresh Debian machine it installs what is missing,
# builds tapegrad and runs the whole suite under ctest.
# One test compares our tokenizer.json with the Hugging Face `tokenizers` library (from PyPI, in a
# venv under build/hf-venv); when PyPI cannot be reached that test is skipped, not failed.
# Then the CUDA backend's cross-backend suite (tests/cuda/) on the emulated device: the same kernel
# sources built as host code on HIP-CPU (../shared/third_party/hip-cpu) in build-emulated/. Where
# nvcc is installed the main build also compiles them for the GPU; without a GPU its CUDA cases
# report "Skipped". TAPEGRAD_SKIP_EMULATED=1 leaves the emulated stage out.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
if [[ ! -x build/hf-venv/bin/python3 ]]; then
  if ! (python3 -m venv build/hf-venv && timeout 300 build/hf-venv/bin/pip install -q tokenizers) >build/hf-venv.log 2>&1; then
    echo "test.sh: could not install Hugging Face tokenizers into build/hf-venv (see build/hf-venv.log): its test will be skipped" >&2
    rm -rf build/hf-venv
  fi
fi
(cd build && ctest --output-on-failure -j"$(nproc)")

if [[ "${TAPEGRAD_SKIP_EMULATED:-0}" != 1 ]]; then
  hip_cpu="$(pwd)/../shared/third_party/hip-cpu"
  if [[ -f "$hip_cpu/include/hip/hip_runtime.h" ]]; then
    cmake -S . -B build-emulated -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_CUDA_EMULATED=ON \
      -DTAPEGRAD_HIP_CPU_DIR="$hip_cpu" -DTAPEGRAD_BENCH=OFF >/dev/null
    cmake --build build-emulated --target tapegrad_cuda_tests -j"$(nproc)"
    (cd build-emulated && ctest --output-on-failure -j"$(nproc)" -L cuda)
  else
    echo "test.sh: no HIP-CPU at $hip_cpu: the CUDA backend's emulated suite did not run" >&2
    exit 1
  fi
fi
