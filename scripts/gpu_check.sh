#!/usr/bin/env bash
# gpu_check.sh — run ON the GPU machine (the device tool's `run`, with carry [".gpudeps"] made by
# scripts/gpu_deps.sh): the cross-backend CUDA suite on the real GPU, the training benchmark of issue 11
# beside PyTorch eager in the same call, compute-sanitizer memcheck + racecheck, one Nsight Compute look,
# and the suite again with the SIMT matmul instead of cuBLAS. Every step has its own time limit, so one
# slow step cannot eat the lease (15 minutes of device time per session, start-up included).
#
# Binaries: gpu_deps.sh --prebuilt builds tapegrad_cuda_tests and bench_train HERE (nvcc 13.0, sm_90,
# no -march=native) into .gpudeps/bin, so the device spends no time compiling; without them (or if they
# do not start there) this script builds with the device's nvcc (~4 min on 16 cores).
# The device has no ../shared: gpu_deps.sh copies the golden LMs and the PyTorch peer into .gpudeps/.
# Logs go to $OUT (at most 8 files come back: gpu.txt, tests.log, bench.log, memcheck.log,
# racecheck.log, ncu.log, kernel_times.md, main_job.log, attention.log, torch.log, summary.md; a device build's log goes to gpu.txt), else
# build-gpu/logs.
#   device run (carry [".gpudeps"]): bash scripts/gpu_check.sh [all|bf16|bf16:tests|bf16:bench|bf16:torch|bf16:main|bf16:profile]
# bf16 (issue 23): the whole cuda suite (its [bf16] cases: every backend function in bf16 against the CPU,
# cuBLAS's bf16 GEMM against the CPU's), memcheck over the bf16 cases, bench_train --precision bf16 beside
# --tf32 1 on tiny / tinyB64 / gpt2s, PyTorch's bf16 and bf16c (torch.compile) in the same call, and the
# main job trained on the GPU in bf16 and in fp32 (validation losses side by side). Before the training
# benchmark: compute-sanitizer over the bf16, flash-attention and mma cases, and attention alone (bench_attention
# with the tensor-core and the SIMT kernel beside PyTorch SDPA's flash / cuDNN / efficient backends: attention.log).
set -uo pipefail
mode=${1:-all}
# bf16 runs five parts; one part alone fits one device call of ~5 minutes: bf16:tests, bf16:bench (ours and
# llm.c), bf16:torch (PyTorch), bf16:main, bf16:profile (several: bf16:bench,torch).
parts=${mode#bf16:}; [[ $mode == bf16 ]] && parts="tests bench torch main profile"
parts=${parts//,/ }; [[ $mode == bf16* ]] && mode=bf16
[[ $mode == all || $mode == bf16 ]] || { echo "usage: gpu_check.sh [all|bf16|bf16:tests|bf16:bench|bf16:torch|bf16:main|bf16:profile]" >&2; exit 2; }
want() { [[ " $parts " == *" $1 "* ]]; }
cd "$(dirname "$0")/.."
root=$PWD
out="${OUT:-build-gpu/logs}"
mkdir -p "$out"
deps=/tmp/gpudeps
system_ld_path=${LD_LIBRARY_PATH:-}
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
# libnccl: the toolkit's, else the one in PyTorch's wheel.
nccl_dir=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
[[ -n "$nccl_dir" ]] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_dir"
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib64:/usr/local/cuda/lib"
py_env=(env "LD_LIBRARY_PATH=$system_ld_path")  # PyTorch with the machine's own libraries, not ours
# The binaries look for the golden LMs at <source dir>/../shared: the prebuilt ones at the path in
# .gpudeps/shared_dir (mkdir its parent: the kernel resolves /x/main/.. only if /x/main exists).
for want in "$root/../shared" $(cat .gpudeps/shared_dir 2>/dev/null); do
  if [[ -d .gpudeps/shared && ! -e "$want" ]]; then
    mkdir -p "${want%/../shared}" && ln -sfn "$root/.gpudeps/shared" "$(realpath -m "$want")"
  fi
done
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
  nvcc --version | tail -1; lscpu | grep -E "Model name|^CPU\(s\)"; echo "nccl: ${nccl_dir:-none}"
} 2>&1 | tee "$out/gpu.txt"
step() { local name=$1 limit=$2; shift 2; echo "== $name (limit ${limit}s)"; local t0=$SECONDS
  timeout -k 5 "$limit" "$@"; local rc=$?; echo "== $name: exit $rc after $((SECONDS - t0))s"; return $rc; }

bin=/tmp/tgbin
mkdir -p $bin
for f in .gpudeps/bin/*.xz; do
  [[ -f $f ]] && python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" \
    "$f" "$bin/$(basename "$f" .xz)" && chmod +x "$bin/$(basename "$f" .xz)"
done
if [[ -x $bin/tapegrad_cuda_tests && -x $bin/bench_train ]] && ! ldd $bin/tapegrad_cuda_tests $bin/bench_train | grep -q "not found"; then  # (the llm.c binaries need libcudnn / the driver's NVML, found later)
  echo "using the prebuilt binaries in $bin"
  t=$bin/tapegrad_cuda_tests; b=$bin/bench_train
else
  echo "prebuilt binaries missing or not starting here: building on the device"
  ldd $bin/* 2>&1 | grep "not found"
  {
    step configure 120 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DTAPEGRAD_NATIVE=OFF -DTAPEGRAD_BENCH=ON
    step build 330 cmake --build build-gpu --target tapegrad_cuda_tests bench_train -j16
  } 2>&1 | tee -a "$out/gpu.txt" | tail -20
  t=build-gpu/tests/tapegrad_cuda_tests; b=build-gpu/bench/bench_train
fi

if [[ $mode == bf16 ]]; then
  if want tests; then
  step "tests (cuBLAS, all)" 120 "$t" --durations yes 2>&1 | tee "$out/tests.log" | grep -vE "^[0-9.]+ s: " | tail -25
  step "memcheck [bf16],[flash],[index_det],[ce_inplace],[decode_kernels],[decode_graph],[add_rmsnorm],[sample_token_san]" 120 \
    compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 "$t" \
    "[bf16],[flash],[mma],[index_det],[ce_inplace],[decode_kernels],[decode_graph],[add_rmsnorm],[sample_token_san]" 2>&1 \
    | tee "$out/memcheck.log" | tail -6
  step "racecheck [flash],[index_det],[decode_kernels],[add_rmsnorm],[sample_token_san]" 75 compute-sanitizer --tool racecheck \
    --error-exitcode 9 "$t" "[flash],[mma],[index_det],[decode_kernels],[add_rmsnorm],[sample_token_san]" \
    2>&1 | tee "$out/racecheck.log" | grep -E "^== |RACECHECK SUMMARY|test cases" | tail -4
  # Attention alone: our tensor-core and SIMT kernels, then PyTorch SDPA's backends, same shapes, same call.
  {
    for impl in tc simt; do
      [[ -x $bin/bench_attention ]] && TAPEGRAD_CUDA_ATTENTION=$impl step "attention $impl" 60 \
        $bin/bench_attention --device cuda --precision bf16 --reps 20
    done
    [[ -f bench/torch_attention.py ]] && step "attention pytorch" 90 "${py_env[@]}" python3 bench/torch_attention.py \
      --dtype bf16 --reps 20
  } 2>&1 | tee "$out/attention.log" | grep -vE "^RESULT" | tail -30
  fi
  if want bench; then
  {
    for cfg in tiny tinyB64 gpt2s; do
      steps=20; [[ $cfg == gpt2s ]] && steps=10
      step "bench $cfg bf16" 60 "$b" --device cuda --config "$cfg" --precision bf16 --steps $steps --warmup 3 --sgemm-n 8192
      step "bench $cfg tf32" 45 "$b" --device cuda --config "$cfg" --tf32 1 --steps $steps --warmup 3 --sgemm-n 8192
    done
    for p in bf16 fp32; do
      [[ -x $bin/bench_decode ]] && step "decode gpt2s $p" 60 $bin/bench_decode --device cuda --config gpt2s --precision $p
    done
    # llm.c (gpt2s's twin: GPT-2 124M, B16 T1024, bf16, no cuDNN), prebuilt by gpu_deps.sh --prebuilt.
    [[ -x $bin/train_gpt2cu ]] && step "llm.c" 120 $bin/train_gpt2cu -i .gpudeps/llmc_data/ts_train.bin \
      -j .gpudeps/llmc_data/ts_val.bin -e d12 -b 16 -t 1024 -d 16384 -x 40 -v 20 -s 0 -o none
    # llm.c with cuDNN attention: libcudnn.so.9 from PyTorch's wheel.
    cudnn_dir=$("${py_env[@]}" python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
    [[ -x $bin/train_gpt2cu_cudnn ]] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$cudnn_dir" step "llm.c cudnn" 120 \
      $bin/train_gpt2cu_cudnn -i .gpudeps/llmc_data/ts_train.bin -j .gpudeps/llmc_data/ts_val.bin -e d12 -b 16 -t 1024 \
      -d 16384 -x 40 -v 20 -s 0 -o none
  } 2>&1 | tee "$out/bench.log" | grep -E "RESULT|== |step time|of which|step +40/|decode tok/s|limit tok/s" | tail -50
  fi
  if want torch; then  # the PyTorch peer of the training table (eager bf16, torch.compile bf16c) and of decoding
    {
    peer=.gpudeps/torch_lm_modern.py
    [[ -f "$peer" ]] && PYTHONUNBUFFERED=1 step "pytorch" 300 "${py_env[@]}" python3 "$peer" \
      --configs tiny,tinyB64,gpt2s --modes tf32,bf16,bf16c --gen 256
    } 2>&1 | tee "$out/torch.log" | grep -E "RESULT|== " | tail -20
  fi
  # Issue 23's table from whatever this call measured (run it here again over the logs of several calls).
  python3 bench/combine_gpu.py "$out"/bench.log "$out"/torch.log "$out"/attention.log | tee "$out/summary.md"
  if want profile; then  # where a gpt2s bf16 step's time goes: every kernel's time under ncu, summed per name
    step "ncu step gpt2s bf16" 150 ncu --clock-control none --csv --metrics gpu__time_duration.sum --print-units base \
      "$b" --device cuda --config gpt2s --precision bf16 --steps 1 --warmup 0 --sgemm-n 64 > /tmp/ncu_step_bf16.csv 2>&1
    python3 bench/kernel_times.py /tmp/ncu_step_bf16.csv > "$out/kernel_times.md"; head -30 "$out/kernel_times.md"
  fi
  if want main && [[ -x $bin/tapegrad ]]; then
    tool=$bin/tapegrad; corpus=corpus/tinystories_head.txt
    {
      step "main job: tokenizer" 60 "$tool" tokenize train --input "$corpus" --vocab-size 2048 --out /tmp/tg_tok
      for p in bf16 fp32; do
        step "main job: train on cuda, $p" 150 "$tool" train --device cuda --precision $p --text "$corpus" \
          --tokenizer /tmp/tg_tok --context 128 --d-model 128 --layers 4 --heads 4 --batch-size 16 --steps 800 \
          --lr 3e-3 --warmup-steps 50 --eval-every 100 --checkpoint-every 800 --out /tmp/tg_main_$p
        grep '"eval"' /tmp/tg_main_$p/metrics.jsonl | cut -c1-120
      done
      step "main job: train on cuda, bf16, --cuda-graph on" 150 "$tool" train --device cuda --precision bf16 \
        --cuda-graph on --text "$corpus" --tokenizer /tmp/tg_tok --context 128 --d-model 128 --layers 4 --heads 4 \
        --batch-size 16 --steps 800 --lr 3e-3 --warmup-steps 50 --eval-every 100 --checkpoint-every 800 \
        --out /tmp/tg_main_bf16_graph
      for r in bf16 bf16_graph; do  # the same losses (up to index_add's atomics), tokens/s side by side
        python3 -c "import json,sys; m=[json.loads(l) for l in open(sys.argv[1])]; t=[x['tokens_per_s'] for x in m if x['kind']=='train'];
print(sys.argv[2], 'val', [round(x['val_loss'],4) for x in m if x['kind']=='eval'], 'median tok/s', sorted(t)[len(t)//2])" \
          /tmp/tg_main_$r/metrics.jsonl "$r"
      done
      step "main job: generate on cuda, bf16" 60 "$tool" generate --device cuda --precision bf16 \
        --checkpoint /tmp/tg_main_bf16 --prompt "Once upon a time" --max-tokens 60 --seed 1
      # gpt2s's shape (d 768, 12 layers, 12 heads, T 1024, batch 16) on the corpus: its first 200 steps in bf16
      # beside TF32, the validation losses every 50 steps side by side (issue 23 §4: within 1 % relative).
      for p in bf16 tf32; do
        step "gpt2s shape: 200 steps on cuda, $p" 150 "$tool" train --device cuda --precision $p --text "$corpus" \
          --tokenizer /tmp/tg_tok --context 1024 --d-model 768 --layers 12 --heads 12 --batch-size 16 --steps 200 \
          --lr 6e-4 --warmup-steps 20 --eval-every 50 --checkpoint-every 200 --out /tmp/tg_gpt2s_$p
      done
      python3 - <<'PY'
import json
ev = {p: [json.loads(l) for l in open(f"/tmp/tg_gpt2s_{p}/metrics.jsonl") if '"eval"' in l] for p in ("bf16", "tf32")}
for a, b in zip(ev["bf16"], ev["tf32"]):
    va, vb = a["val_loss"], b["val_loss"]
    print(f"gpt2s shape eval step {a['step']}: bf16 {va:.4f} tf32 {vb:.4f} relative {abs(va - vb) / vb:.2e}")
PY
    } 2>&1 | tr '\r' '\n' | tee "$out/main_job.log" | grep -E "^== |eval|tok/s|Once" | tail -40
  fi
  echo "== done after ${SECONDS}s"
  exit 0
fi

# 1. The cross-backend suite on the real device, cuBLAS matmuls.
step "tests (cuBLAS)" 90 "$t" --durations yes 2>&1 | tee "$out/tests.log" \
  | grep -vE "^[0-9.]+ s: " | tail -25
sort -rn "$out/tests.log" | grep -E "^[0-9.]+ s: " | head -8

# 2. The benchmark: ours, then PyTorch eager in the same call.
{
  for cfg in tiny tinyB64 gpt2s; do
    steps=20; [[ $cfg == gpt2s ]] && steps=10
    for tf in 0 1; do step "bench $cfg tf32=$tf" 45 "$b" --device cuda --config "$cfg" --tf32 "$tf" --steps $steps --warmup 3 --sgemm-n 8192; done
  done
  peer=.gpudeps/torch_lm_modern.py
  [[ -f "$peer" ]] && PYTHONUNBUFFERED=1 step "pytorch" 120 "${py_env[@]}" python3 "$peer" --configs tiny,tinyB64,gpt2s --modes fp32,tf32
} 2>&1 | tee "$out/bench.log" | grep -E "RESULT|== " | tail -30

# 3. compute-sanitizer (not the golden LMs or training: too slow under the tools; not NCCL, whose own
#    start-up probes kernels with an expected error 209 and keeps its buffers to the end).
step memcheck 90 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 "$t" "~[golden]~[train]~[nccl]" \
  2>&1 | tee "$out/memcheck.log" | tail -6
{
  step "racecheck (reduce, softmax, fused)" 50 compute-sanitizer --tool racecheck --error-exitcode 9 "$t" \
    "[reduce],[softmax],[fused]"
  step "racecheck (attention, every head size)" 50 compute-sanitizer --tool racecheck --error-exitcode 9 "$t" \
    "attention: head sizes*"
} 2>&1 | tee "$out/racecheck.log" | grep -E "^== |RACECHECK SUMMARY|test cases" | tail -8

# 4. Nsight Compute: the attention kernels at gpt2s shapes (the last layer's forward, then its dK/dV
#    and dQ: speed of light, occupancy), then the time of every kernel of one gpt2s TF32 training step
#    (bench/kernel_times.py sums them per kernel name).
step "ncu attention" 60 ncu --clock-control none -k "regex:forward_kernel|key_grad_kernel|query_grad_kernel" \
  --launch-skip 11 --launch-count 3 --section SpeedOfLight --section Occupancy --section LaunchStats \
  "$b" --device cuda --config gpt2s --steps 1 --warmup 0 > "$out/ncu.log" 2>&1
grep -E "^== " "$out/ncu.log"
step "ncu step" 100 ncu --clock-control none --csv --metrics gpu__time_duration.sum --print-units base \
  "$b" --device cuda --config gpt2s --tf32 1 --steps 1 --warmup 0 --sgemm-n 64 > /tmp/ncu_step.csv 2>&1
[[ -f bench/kernel_times.py ]] && python3 bench/kernel_times.py /tmp/ncu_step.csv > "$out/kernel_times.md"; head -25 "$out/kernel_times.md"

# 5. The suite again with the SIMT matmul (the kernel the emulated device runs).
TAPEGRAD_CUDA_MATMUL=simt step "tests (SIMT matmul)" 40 "$t" "[matmul],[ops],[train]" 2>&1 \
  | tee -a "$out/tests.log" | tail -4
# 6. The README's main job with `train --device cuda`: tokenizer, 800 steps, then eval and generation
#    (on the CPU) from the GPU-trained checkpoint.
if [[ -x $bin/tapegrad ]]; then
  tool=$bin/tapegrad; run=/tmp/tg_main_job; corpus=corpus/tinystories_head.txt
  {
    step "main job: tokenizer" 60 "$tool" tokenize train --input "$corpus" --vocab-size 2048 --out "$run/tokenizer"
    step "main job: train on cuda" 120 "$tool" train --device cuda --text "$corpus" --tokenizer "$run/tokenizer" \
      --context 128 --d-model 128 --layers 4 --heads 4 --batch-size 16 --steps 800 --lr 3e-3 --warmup-steps 50 \
      --eval-every 100 --checkpoint-every 100 --out "$run"
    step "main job: eval" 60 "$tool" eval --checkpoint "$run/checkpoints/best.safetensors" --text "$corpus" --held-out 0.1
    step "main job: generate" 60 "$tool" generate --checkpoint "$run/checkpoints/best.safetensors" \
      --prompt "Once upon a time" --max-tokens 60 --seed 1
  } 2>&1 | tr '\r' '\n' | tee "$out/main_job.log" | grep -E "^== |loss|tok/s|Once" | tail -16
fi
echo "== done after ${SECONDS}s"
