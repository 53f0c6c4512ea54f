#!/usr/bin/env bash
# gpu_deps.sh — run HERE (a Debian 12 machine with apt), before a session's GPU calls: downloads the
# Debian packages the build needs into .gpudeps/ (git-ignored, ~26 MB), because the GPU machine has
# nvcc, cuBLAS and CMake but no Debian -dev packages and no network. Pass `carry: [".gpudeps"]` to the
# device tool's run; scripts/gpu_check.sh unpacks them there.
#   scripts/gpu_deps.sh              the packages + the PyTorch peer + the golden LMs
#   scripts/gpu_deps.sh --prebuilt   also build tapegrad_cuda_tests, the benchmarks (train, attention, decode) and the tool here (build-gpu/,
#                                    sm_90, no -march=native: the device's CPU is not this one) and put
#                                    them into .gpudeps/bin, xz-compressed, so the lease is not spent
#                                    compiling. Only works where this machine's nvcc is the device's (13.0).
# The carried tree must stay under the device tool's 64 MiB (measured: ~45 MiB with --prebuilt).
set -euo pipefail
cd "$(dirname "$0")/.."
prebuilt=0
[[ "${1:-}" == --prebuilt ]] && prebuilt=1
rm -rf .gpudeps && mkdir -p .gpudeps
runtime_pkgs="libfmt9 libopenblas0-openmp libgomp1 libgfortran5 libpcre2-8-0"
build_pkgs="libfmt-dev libopenblas-openmp-dev libopenblas-dev catch2 libboost-program-options1.74-dev
  libboost-program-options1.74.0 libboost1.74-dev libpcre2-dev libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  nlohmann-json3-dev"
pkgs="$runtime_pkgs $build_pkgs"  # the build packages too: gpu_check.sh builds there if the binaries fail
# shellcheck disable=SC2086
(cd .gpudeps && apt-get download $pkgs 2>&1 | grep -v "unsandboxed as root" | tail -1)
# The PyTorch peer of the GPU benchmark and the golden LMs (the device machine has no ../shared).
shared=../shared
if [[ -d $shared ]]; then
  cp $shared/bench/torch_lm_modern.py .gpudeps/
  mkdir -p .gpudeps/shared/data && cp -r $shared/data/reference .gpudeps/shared/data/
else
  echo "gpu_deps.sh: no ../shared: the benchmark runs without its peer, the golden-LM tests fail" >&2
fi
if [[ $prebuilt == 1 ]]; then
  # No MPI: the device machine has no Open MPI libraries for the tool to load.
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DTAPEGRAD_NATIVE=OFF -DTAPEGRAD_BENCH=ON -DTAPEGRAD_MPI=OFF >/dev/null
  cmake --build build-gpu --target tapegrad_cuda_tests bench_train bench_attention bench_decode tapegrad_tool
  mkdir -p .gpudeps/bin
  # The CUDA backend's plugin beside them: the tool and bench_train open it from their folder, the tests
  # (which link it) find it there through their RUNPATH ($ORIGIN).
  for exe in build-gpu/tests/tapegrad_cuda_tests build-gpu/bench/bench_train build-gpu/bench/bench_attention build-gpu/bench/bench_decode \
             build-gpu/tools/tapegrad \
             build-gpu/kernels/libtapegrad_cuda.so; do
    strip -o ".gpudeps/bin/$(basename $exe)" "$exe" && xz -T0 -6 ".gpudeps/bin/$(basename $exe)"
  done
  # llm.c's GPU trainer (the peer of issue 23's benchmark), built here for sm_90 without MPI, NCCL or cuDNN.
  # It links libnvidia-ml (the driver's: on the GPU machine, not here): against a stand-in with its soname.
  if [[ -d $shared/bench/peers/llmc ]]; then
    rm -rf build-gpu/llmc && cp -r $shared/bench/peers/llmc build-gpu/llmc && mkdir -p build-gpu/nvml
    printf '%s\n' 'int nvmlInit_v2(void){return 999;} const char* nvmlErrorString(int r){(void)r;return "";}' \
      'int nvmlDeviceGetHandleByIndex_v2(){return 999;} int nvmlDeviceGetClockInfo(){return 999;}' \
      'int nvmlDeviceGetCurrentClocksThrottleReasons(){return 999;} int nvmlDeviceGetFanSpeed(){return 999;}' \
      'int nvmlDeviceGetMaxClockInfo(){return 999;} int nvmlDeviceGetPowerManagementLimit(){return 999;}' \
      'int nvmlDeviceGetPowerUsage(){return 999;} int nvmlDeviceGetSamples(){return 999;}' \
      'int nvmlDeviceGetTemperature(){return 999;} int nvmlDeviceGetTemperatureThreshold(){return 999;}' \
      > build-gpu/nvml/stub.c
    gcc -shared -fPIC -w -o build-gpu/nvml/libnvidia-ml.so -Wl,-soname,libnvidia-ml.so.1 build-gpu/nvml/stub.c
    make -C build-gpu/llmc train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0 GPU_COMPUTE_CAPABILITY=90 \
      NVCC_LDFLAGS="-lcublas -lcublasLt -lnvidia-ml -L$PWD/build-gpu/nvml" >/dev/null
    strip -o .gpudeps/bin/train_gpt2cu build-gpu/llmc/train_gpt2cu && xz -T0 -6 .gpudeps/bin/train_gpt2cu
    # The same with cuDNN's attention (USE_CUDNN=1): the cudnn-frontend headers from PyPI's nvidia-cudnn-frontend
    # wheel, cudnn.h and libcudnn from the toolkit here; on the GPU machine libcudnn.so.9 is PyTorch's wheel's.
    if [[ -f /usr/local/cuda/include/cudnn.h ]] && rm -rf build-gpu/cudnn_fe && mkdir -p build-gpu/cudnn_fe &&
       pip download -q nvidia-cudnn-frontend --no-deps -d build-gpu/cudnn_fe >/dev/null 2>&1; then
      (cd build-gpu/cudnn_fe && python3 -m zipfile -e nvidia_cudnn_frontend-*.whl wheel)
      rm -rf build-gpu/llmc_cudnn && cp -r $shared/bench/peers/llmc build-gpu/llmc_cudnn
      # llm.c's Makefile looks for the headers only in ~/cudnn-frontend/include or ./cudnn-frontend/include;
      # the frontend (1.x from PyPI) compiles some engines with NVRTC at run time: -lnvrtc (the toolkit's, there too).
      mkdir -p build-gpu/llmc_cudnn/cudnn-frontend && cp -r build-gpu/cudnn_fe/wheel/include build-gpu/llmc_cudnn/cudnn-frontend/
      if make -C build-gpu/llmc_cudnn train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=1 GPU_COMPUTE_CAPABILITY=90 \
           NVCC_LDFLAGS="-lcublas -lcublasLt -lcudnn -lnvrtc -lnvidia-ml -L$PWD/build-gpu/nvml" >/dev/null; then
        strip -o .gpudeps/bin/train_gpt2cu_cudnn build-gpu/llmc_cudnn/train_gpt2cu
        xz -T0 -6 .gpudeps/bin/train_gpt2cu_cudnn
      else
        echo "gpu_deps.sh: llm.c with cuDNN did not build (above): the benchmark runs llm.c without cuDNN only" >&2
      fi
    else
      echo "gpu_deps.sh: no cudnn.h or no nvidia-cudnn-frontend wheel: llm.c without cuDNN only" >&2
    fi
    mkdir -p .gpudeps/llmc_data && cp build-gpu/llmc/data/ts_*.bin .gpudeps/llmc_data/
  fi
  # Where those binaries look for ../shared (TAPEGRAD_SHARED_DIR): gpu_check.sh links it there.
  echo "$PWD/../shared" > .gpudeps/shared_dir
fi
du -sh .gpudeps
