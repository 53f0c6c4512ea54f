#!/usr/bin/env bash
# gpu_check.sh — run ON the GPU machine (the device tool's `run`, with carry [".gpudeps"] made by
# scripts/gpu_deps.sh): builds the CUDA backend with nvcc for sm_90, runs the cross-backend suite on
# the real GPU (cuBLAS and the SIMT matmul both), then compute-sanitizer memcheck and racecheck over
# it, then the training benchmark of issue 11 beside PyTorch eager in the same call (bench_train --device
# cuda vs ../shared/bench/torch_lm_modern.py, tiny B8 / tiny B64 / gpt2s B16, fp32 and TF32).
# Logs go to $OUT (the device tool brings them back), else build-gpu/logs. The device machine has no
# ../shared: gpu_deps.sh puts the peer into .gpudeps/ too.
#   device run: bash scripts/gpu_check.sh            (about 10 minutes: build ~4, tests, sanitizers)
# STATUS: written in a session without a GPU; not yet run on a device. Expect to fix paths on first use.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-build-gpu/logs}"
mkdir -p "$out"
deps=/tmp/gpudeps
if [[ -d .gpudeps ]]; then
  mkdir -p "$deps"
  for f in .gpudeps/*.deb; do dpkg -x "$f" "$deps"; done
  lib="$deps/usr/lib/x86_64-linux-gnu"
  export CMAKE_PREFIX_PATH="$deps/usr"
  export PKG_CONFIG_PATH="$lib/pkgconfig:$lib/openblas-openmp/pkgconfig:$deps/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$deps"  # the .pc files say prefix=/usr
  export LD_LIBRARY_PATH="$lib:$lib/openblas-openmp:${LD_LIBRARY_PATH:-}"
  export CPATH="$deps/usr/include:${CPATH:-}"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
step() { echo "== $1"; shift; "$@"; echo "== exit $?"; }
{
  step configure cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DTAPEGRAD_BENCH=ON
  step build cmake --build build-gpu --target tapegrad_cuda_tests bench_train -j16
} 2>&1 | tee "$out/build.log" | tail -20
t=build-gpu/tests/tapegrad_cuda_tests
step "tests (cuBLAS)" "$t" 2>&1 | tee "$out/tests.log" | tail -15
TAPEGRAD_CUDA_MATMUL=simt step "tests (SIMT matmul)" "$t" "[matmul],[ops],[lm]" 2>&1 | tee "$out/tests_simt.log" | tail -5
step memcheck compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 "$t" "~[golden]" \
  2>&1 | tee "$out/memcheck.log" | tail -15
step racecheck compute-sanitizer --tool racecheck --error-exitcode 9 "$t" "[attention],[reduce],[softmax],[fused]" \
  2>&1 | tee "$out/racecheck.log" | tail -15
{
  for cfg in tiny tinyB64 gpt2s; do
    for tf in 0 1; do build-gpu/bench/bench_train --device cuda --config "$cfg" --tf32 "$tf" --steps 20 --warmup 5; done
  done
  peer=.gpudeps/torch_lm_modern.py
  [[ -f "$peer" ]] && python3 "$peer" --configs tiny,tinyB64,gpt2s --modes fp32,tf32
} 2>&1 | tee "$out/bench.log" | grep -E "RESULT|tokens/s" | tail -20
