#!/usr/bin/env bash
# run.sh — tapegrad's benchmarks side by side with PyTorch / LibTorch, on this machine, now.
#
#   bench/run.sh overhead   per-op overhead: bench_overhead vs LibTorch C++ (shared/bench/op_overhead.cpp)
#                           and PyTorch (shared/bench/torch_op_overhead.py)
#   bench/run.sh large      matmul 2048² fwd+bwd vs cblas_sgemm; elementwise/reductions on 16M floats vs
#                           memcpy; bench_large vs bench/torch_large_ops.py, at 1 and 2 threads
#   bench/run.sh all        both (default)
#   bench/run.sh bpe        BPE training/encoding (bench_bpe, one process per configuration so peak RSS is
#                           per measurement), at 1 and 2 threads; ours alone (no peer). Env: BENCH_BPE_BIG
#                           (the ~200 MB training file, generated once under /tmp when missing), BENCH_SHARED
#                           (default ../shared), BENCH_BPE_BIN (a bench_bpe already built elsewhere, e.g.
#                           build-data/bench/bench_bpe: then nothing is built). Never run by `all`.
#   bench/run.sh train [micro|small|tiny|all]
#                           one full training step (forward, cross-entropy, backward, AdamW) of the
#                           TransformerLM: bench_train vs shared/bench/torch_lm.py, same config, same
#                           run, at 1 and 2 threads, alternating ours/PyTorch BENCH_TRAIN_RUNS times
#                           (default 3; medians of the per-run medians). Env: BENCH_STEPS (timed steps
#                           per run, default 10 for micro/small, 6 for tiny). Never run by `all`.
#   bench/run.sh tool [micro|small|tiny|all]
#                           the training loop of the command-line tool against the bare step: `tapegrad train`
#                           (on a token file of uniform random ids, no --val, a metrics.jsonl line every step,
#                           gradient-norm clipping, checkpoint only at the end) vs bench_train, same config and
#                           threads, target: the tool ≥ 97 % of bench_train's tokens/s; beside them PyTorch 2.x
#                           eager and torch.compile (shared/bench/torch_lm_modern.py --device cpu --modes
#                           fp32,fp32c, from the venv /opt/torch2 of shared/bench/README.md). The programs
#                           alternate BENCH_TOOL_RUNS times (default 3; medians over the runs); BENCH_STEPS as
#                           for train, 3 warm-up steps; BENCH_TORCH2 (default /opt/torch2/bin/python). Table:
#                           bench/combine_tool.py. Never run by `all`.
#   bench/run.sh generate   text generation, batch 1 (table: bench/combine_generate.py; never run by `all`):
#                           (1) stories260K (shared/data/llama2c, imported with `tapegrad import llama2c`):
#                           `tapegrad generate` decode/prefill tok/s vs llama2.c's run.c (-O3 and -Ofast
#                           -march=native; -fopenmp with OMP_NUM_THREADS=N past 1 thread) at BENCH_THREADS;
#                           (2) small/tiny, random weights, 256 greedy tokens, 1 thread: ours vs PyTorch 2
#                           (torch_lm_modern.py --gen 256), beside the memory-bandwidth bound (4 bytes ×
#                           weights read per token ÷ bench_large's memcpy GB/s); (3) prefill of a 255-token
#                           prompt (tiny, 1 thread) vs bench_train's forward+loss tok/s. BENCH_GEN_RUNS
#                           alternations (default 3, medians); BENCH_GEN_PRESETS=none|small|tiny|all
#                           (default all: parts 2 and 3; (3) needs tiny); BENCH_TORCH2; BENCH_SHARED.
#   bench/run.sh int8       int8 generation (bench/int8.py; never run by `all`): the small and tiny presets
#                           (random weights, `tapegrad quantize --group 64`), batch 1, 256 greedy tokens, ours
#                           float32 / int8 / int8 with float activations vs PyTorch (/opt/torch2 if it imports
#                           torch, else python3) float32 and quantize_dynamic int8 (bench/torch_int8_generate.py)
#                           vs llama2.c's runq.c (-Ofast -march=native, -fopenmp at 2 threads) on our
#                           `export llama2c --version 2` of the same weights; 1 thread (tiny: 1 and 2); file
#                           sizes, peak RSS, the bandwidth limit per row. BENCH_GEN_RUNS alternations (default 3).
#   bench/run.sh int8sizes  from what model size int8 pays (bench/int8_sizes.py; never run by `all`): stories260K,
#                           micro, small, tiny; float32 vs int8 in groups of 64 vs groups of 4 (and runq.c for
#                           stories260K), 1 thread, tok/s from CPU time and as printed; BENCH_GEN_RUNS rounds
#                           (default 5); BENCH_INT8_BEFORE=another tapegrad binary adds its columns beside ours.
#   bench/run.sh race       tapegrad against nanoGPT's own CPU recipe on tiny-shakespeare, character level
#                           (bench/race.py; never run by `all`): nanoGPT's README command (../shared/bench/peers/
#                           nanogpt, PyTorch 2.x from BENCH_TORCH2, default /opt/torch2/bin/python) vs `tapegrad
#                           train` with nanoGPT's recipe vs `--recipe modern` (a short run, and one of nanoGPT's
#                           wall-clock), at BENCH_THREADS (default 1,2); losses over the whole validation split.
#   bench/run.sh mainjob    the main job's setup (TinyStories excerpt, BPE 2048, 800 steps) with each recipe,
#                           tapegrad and its PyTorch peer (bench/main_job_race.py, bench/torch_peer_train.py;
#                           PyTorch from BENCH_TORCH2, which must have torch.optim.Muon: 2.9 or later) at
#                           BENCH_THREADS (default 1; one thread count); never run by `all`.
#
# Steps: source scripts/blas_env.sh (OPENBLAS_CORETYPE for this CPU, the same for every program run
# here); scripts/deps.sh --bench (installs only what is missing; plain deps.sh for `tool`); scripts/build.sh (Release, build/);
# the LibTorch peer is compiled once into build/bench-peers/. Prints one combined table per mode and
# ends with exactly one line `RESULT {json}`. Without python3-torch / libtorch-dev it runs ours alone.
#
# Environment: BENCH_REPS (default 9: median of 9 after a warm-up), BENCH_THREADS (default 1,2),
# BENCH_N (default 10000, overhead chain length), BENCH_PEERS=0 (ours alone), BENCH_PYTHON
# (default /usr/bin/python3), BENCH_BUILD=0 (build nothing: use the binaries already in build/).
# OMP_WAIT_POLICY is passed through unchanged
# (measured: it makes no difference here, see bench/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
mode=${1:-all}
case "$mode" in overhead | large | all | bpe | train | tool | generate | int8 | int8sizes | race | mainjob) ;; *)
  echo "usage: bench/run.sh overhead|large|all|bpe|train|tool|generate|int8|int8sizes|race|mainjob" \
    "[micro|small|tiny|all]" >&2
  exit 2
  ;;
esac
if [[ $mode == race || $mode == mainjob ]]; then  # the two training races: PyTorch 2.x peers from BENCH_TORCH2
  scripts/deps.sh
  scripts/build.sh >/dev/null
  source scripts/blas_env.sh
  if [[ $mode == race ]]; then script=bench/race.py threads=${BENCH_THREADS:-1,2}
  else script=bench/main_job_race.py threads=${BENCH_THREADS:-1}; fi
  exec python3 "$script" --tool build/tools/tapegrad --python "${BENCH_TORCH2:-/opt/torch2/bin/python}" \
    --threads "$threads"
fi
REPS=${BENCH_REPS:-9}
THREADS=${BENCH_THREADS:-1,2}
NCHAIN=${BENCH_N:-10000}
PY=${BENCH_PYTHON:-/usr/bin/python3}  # Debian's python3, the one python3-torch installs into
PEERS=${BENCH_PEERS:-1}              # 0: ours alone (as when the peers are not installed)

# shellcheck source=../scripts/blas_env.sh
source scripts/blas_env.sh
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-}"
[[ -z "$OPENBLAS_CORETYPE" ]] && unset OPENBLAS_CORETYPE

# `tool` compares against the PyTorch 2.x venv, not Debian's PyTorch 1.13: no --bench packages for it.
deps_args=(--bench)
[[ $mode == tool || $mode == generate || $mode == int8 || $mode == int8sizes ]] && deps_args=()
if ! scripts/deps.sh "${deps_args[@]}"; then
  echo "run.sh: warning: scripts/deps.sh ${deps_args[*]} failed; going on with what is installed" >&2
fi

log() { echo "run.sh: $*" >&2; }

# Sets configs=(...) from the mode's second argument: micro, small, tiny or all.
pick_configs() {
  case "$1" in micro | small | tiny) configs=("$1") ;; all) configs=(micro small tiny) ;; *)
    log "error: unknown config '$1' (micro, small, tiny or all)"
    exit 2
    ;;
  esac
}

# ---- build ours (Release, build/) ----
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
bench_targets=(bench_overhead bench_large bench_bpe bench_train)
[[ $mode == tool ]] && bench_targets=(bench_train tapegrad_tool)
[[ $mode == generate ]] && bench_targets=(bench_train bench_large tapegrad_tool)
[[ $mode == int8 ]] && bench_targets=(bench_large tapegrad_tool)
[[ $mode == int8sizes ]] && bench_targets=(tapegrad_tool)
if [[ $mode == bpe && -n ${BENCH_BPE_BIN:-} ]]; then
  log "BENCH_BPE_BIN=$BENCH_BPE_BIN: building nothing"
elif [[ ${BENCH_BUILD:-1} == 0 ]]; then
  log "BENCH_BUILD=0: building nothing, using the binaries in build/"
elif log "building tapegrad (Release) into build/ ..." && ! scripts/build.sh >"$OUT/build.log" 2>&1; then
  # The full build includes the tests; the benchmarks need only the library.
  log "full build failed; building the bench targets alone"
  if ! cmake --build build -j"$(nproc)" --target "${bench_targets[@]}" >>"$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log" >&2
    log "error: could not build ${bench_targets[*]}"
    exit 1
  fi
fi

# ---- peers ----
have_torch_py=0
if ((PEERS)) && [[ -x $PY ]] && $PY -c "import torch" 2>/dev/null; then have_torch_py=1; fi
have_libtorch=0
PEER_DIR=build/bench-peers
PEER_SRC=$ROOT/../shared/bench/op_overhead.cpp
TORCH_OVERHEAD_PY=$ROOT/../shared/bench/torch_op_overhead.py
if ((PEERS)) && [[ $mode == overhead || $mode == all ]] && [[ -f $PEER_SRC ]] &&
  dpkg-query -W -f='${Status}' libtorch-dev 2>/dev/null | grep -q "install ok installed"; then
  mkdir -p "$PEER_DIR"
  if [[ ! -x $PEER_DIR/op_overhead || $PEER_SRC -nt $PEER_DIR/op_overhead ]]; then
    log "compiling the LibTorch peer (once, ~30 s) ..."
    # The build line from the header of shared/bench/op_overhead.cpp.
    if ! g++ -O2 -std=c++17 "$PEER_SRC" -o "$PEER_DIR/op_overhead.tmp" \
      -I/usr/include/torch/csrc/api/include -ltorch -ltorch_cpu -lc10; then
      log "warning: the LibTorch peer did not compile; LibTorch column omitted"
    else
      mv "$PEER_DIR/op_overhead.tmp" "$PEER_DIR/op_overhead"
    fi
  fi
  [[ -x $PEER_DIR/op_overhead ]] && have_libtorch=1
fi

# Programs that set their own thread count get no inherited OMP/OpenBLAS thread variables (an
# inherited OPENBLAS_NUM_THREADS=1 would cap OpenBLAS below what the program asks for).
own_threads() { env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS "$@"; }
# Each program's own `RESULT` line goes to its file only, so the output has exactly one, the last.
hide_result() { grep -v '^RESULT ' || true; }

echo "== tapegrad benchmarks ($mode) | $(date -u '+%Y-%m-%d %H:%M UTC') | $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') | $(nproc) CPUs | load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-<unset>} reps=$REPS"
echo "== (the machine is shared: with a load average above ~1 the figures are depressed; rerun when idle)"

if [[ $mode == overhead || $mode == all ]]; then
  echo
  echo "---- per-op overhead: ours ----"
  own_threads build/bench/bench_overhead "$NCHAIN" 64 "$REPS" | tee "$OUT/ours_overhead.txt" | hide_result
  if ((have_libtorch)); then
    echo "---- per-op overhead: LibTorch C++ (shared/bench/op_overhead.cpp) ----"
    # It calls torch::set_num_threads(1) itself; OMP_NUM_THREADS=1 as its header says.
    OMP_NUM_THREADS=1 "$PEER_DIR/op_overhead" "$NCHAIN" 64 "$REPS" | tee "$OUT/libtorch_overhead.txt" | hide_result || true
  else
    log "LibTorch (libtorch-dev) not available: no LibTorch column"
  fi
  if ((have_torch_py)) && [[ -f $TORCH_OVERHEAD_PY ]]; then
    echo "---- per-op overhead: PyTorch (shared/bench/torch_op_overhead.py) ----"
    $PY "$TORCH_OVERHEAD_PY" --n "$NCHAIN" --reps "$REPS" --threads 1 | tee "$OUT/pytorch_overhead.txt" | hide_result || true
  else
    log "PyTorch (python3-torch) not available: no PyTorch column"
  fi
fi

if [[ $mode == large || $mode == all ]]; then
  echo
  echo "---- large ops: ours ----"
  own_threads build/bench/bench_large --threads "$THREADS" --reps "$REPS" | tee "$OUT/ours_large.txt" | hide_result
  if ((have_torch_py)); then
    echo "---- large ops: PyTorch (bench/torch_large_ops.py) ----"
    own_threads $PY bench/torch_large_ops.py --threads "$THREADS" --reps "$REPS" | tee "$OUT/torch_large.txt" | hide_result || true
  else
    log "PyTorch (python3-torch) not available: ours alone"
  fi
fi

if [[ $mode == bpe ]]; then
  SHARED=${BENCH_SHARED:-$ROOT/../shared}
  FIX=$SHARED/data/cs336/tests/fixtures
  CORP=$SHARED/data/corpora
  BIG=${BENCH_BPE_BIG:-/tmp/tapegrad-bpe-bench/corpora_x200MB.txt}
  BPE=${BENCH_BPE_BIN:-build/bench/bench_bpe}
  [[ -x $BPE ]] || { log "error: $BPE was not built (needs tapegrad_data)"; exit 1; }
  if [[ ! -s $BIG ]]; then
    # ~200 MB: the corpora of shared/data/corpora concatenated until >= 200e6 bytes (outside the repo).
    log "generating $BIG ..."
    mkdir -p "$(dirname "$BIG")"
    : >"$BIG.tmp"
    while (($(stat -c%s "$BIG.tmp") < 200000000)); do cat "$CORP"/*.txt >>"$BIG.tmp"; done
    mv "$BIG.tmp" "$BIG"
  fi
  echo
  echo "---- BPE: train_bpe / train_bpe_file / GPT-2 encode (each row its own process) ----"
  echo "| measurement | threads | wall time | pretok MB/s (encode: MB/s) | merges/s | peak RSS MB | target |"
  echo "|---|---|---|---|---|---|---|"
  IFS=, read -ra TLIST <<<"$THREADS"
  bpe_row() { own_threads "$BPE" "$@" | tee -a "$OUT/bpe.txt" | grep -v '^JSON ' || true; }
  for t in "${TLIST[@]}"; do bpe_row small "$FIX/corpus.en" 500 "$t" 5 0.1; done
  for t in "${TLIST[@]}"; do bpe_row train "$CORP/tinystories_train_head2MiB.txt" 10000 "$t"; done
  for t in "${TLIST[@]}"; do bpe_row train "$BIG" 10000 "$t" 15; done
  for t in "${TLIST[@]}"; do
    bpe_row encode "$FIX/gpt2_vocab.json" "$FIX/gpt2_merges.txt" "$CORP/tinystories_train_head2MiB.txt" "$t" 20
  done
  echo "(train 200 MB: the 15 s target is for 2 threads; trainer = train_bpe_file, which streams the file in 8 MiB blocks)"
  rows=$(grep '^JSON ' "$OUT/bpe.txt" | sed 's/^JSON //' | paste -sd, -)
  cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//; s/"/\\"/g')
  echo
  echo "RESULT {\"mode\":\"bpe\",\"date\":\"$(date -u '+%Y-%m-%dT%H:%M:%SZ')\",\"cpu\":\"$cpu\",\"nproc\":$(nproc),\"threads\":[${THREADS}],\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"big_file\":\"$BIG\",\"measurements\":[$rows]}"
  exit 0
fi

if [[ $mode == train ]]; then
  pick_configs "${2:-all}"
  TRAIN=build/bench/bench_train
  TORCH_LM=$ROOT/../shared/bench/torch_lm.py
  RUNS=${BENCH_TRAIN_RUNS:-3}
  [[ -x $TRAIN ]] || { log "error: $TRAIN was not built (needs tapegrad_nn and tapegrad_optim)"; exit 1; }
  IFS=, read -ra TLIST <<<"$THREADS"
  for cfg in "${configs[@]}"; do
    steps=${BENCH_STEPS:-$([[ $cfg == tiny ]] && echo 6 || echo 10)}
    for t in "${TLIST[@]}"; do
      for ((r = 1; r <= RUNS; r++)); do
        echo "---- train $cfg, $t thread(s), run $r/$RUNS: ours ----"
        own_threads "$TRAIN" --config "$cfg" --threads "$t" --steps "$steps" --warmup 3 |
          tee "$OUT/train_ours_${cfg}_${t}_$r.txt" | hide_result
        if ((have_torch_py)) && [[ -f $TORCH_LM ]]; then
          echo "---- train $cfg, $t thread(s), run $r/$RUNS: PyTorch (shared/bench/torch_lm.py) ----"
          own_threads $PY "$TORCH_LM" --config "$cfg" --threads "$t" --steps "$steps" --warmup 3 |
            tee "$OUT/train_torch_${cfg}_${t}_$r.txt" | hide_result || true
        fi
      done
    done
  done
  ((have_torch_py)) || log "PyTorch (python3-torch) not available: ours alone"
  echo
  COMBINE_PY=$PY
  [[ -x $COMBINE_PY ]] || COMBINE_PY=$(command -v python3)
  "$COMBINE_PY" bench/combine_train.py "$OUT"
  exit 0
fi

if [[ $mode == tool ]]; then
  pick_configs "${2:-all}"
  TRAIN=build/bench/bench_train
  TOOL=build/tools/tapegrad
  TORCH2=${BENCH_TORCH2:-/opt/torch2/bin/python}
  TORCH_LM2=$ROOT/../shared/bench/torch_lm_modern.py
  RUNS=${BENCH_TOOL_RUNS:-3}
  WARM=3
  [[ -x $TRAIN ]] || { log "error: $TRAIN was not built"; exit 1; }
  [[ -x $TOOL ]] || { log "error: $TOOL was not built (target tapegrad_tool)"; exit 1; }
  SYS_PY=$(command -v python3 || true)
  [[ -n $SYS_PY ]] || { log "error: python3 is needed (token files, the table)"; exit 1; }
  have_torch2=0
  if ((PEERS)) && [[ -x $TORCH2 && -f $TORCH_LM2 ]] && "$TORCH2" -c "import torch" 2>/dev/null; then
    have_torch2=1
  else
    log "PyTorch 2 peer missing (needs $TORCH2 with torch, and $TORCH_LM2): no PyTorch 2 columns"
    log "  (install: python3 -m venv /opt/torch2 && /opt/torch2/bin/pip install torch==2.15.0 numpy)"
  fi
  # Token files of uniform random ids in [0, V), data/token_file.h's format, 4 Mi tokens, seeded.
  gen_tokens() {
    "$SYS_PY" - "$1" "$2" <<'PYEOF'
import array, random, struct, sys
path, vocab, n = sys.argv[1], int(sys.argv[2]), 1 << 22
ids = array.array("H", random.Random(vocab).choices(range(vocab), k=n))
if sys.byteorder == "big":
    ids.byteswap()
with open(path, "wb") as f:
    f.write(b"TGTOKENS" + struct.pack("<IIQQ", 1, 2, n, vocab))  # version 1, width 2, count, vocab
    ids.tofile(f)
PYEOF
  }
  IFS=, read -ra TLIST <<<"$THREADS"
  for cfg in "${configs[@]}"; do
    steps=${BENCH_STEPS:-$([[ $cfg == tiny ]] && echo 6 || echo 10)}
    vocab=$([[ $cfg == micro ]] && echo 512 || echo 10000)
    tokens=$OUT/random_$vocab.bin
    [[ -s $tokens ]] || gen_tokens "$tokens" "$vocab"
    for t in "${TLIST[@]}"; do
      for ((r = 1; r <= RUNS; r++)); do
        tag=${cfg}_${t}_$r
        echo "---- tool $cfg, $t thread(s), run $r/$RUNS: bench_train ----"
        own_threads "$TRAIN" --config "$cfg" --threads "$t" --steps "$steps" --warmup "$WARM" |
          tee "$OUT/tool_bench_$tag.txt" | hide_result || log "warning: bench_train failed ($cfg, $t threads)"
        echo "---- tool $cfg, $t thread(s), run $r/$RUNS: tapegrad train ----"
        rundir=$OUT/run_$tag
        own_threads "$TOOL" train --model "$cfg" --train "$tokens" --steps $((WARM + steps)) --threads "$t" \
          --grad-clip 1.0 --out "$rundir" --log-every 1 --print-every 1000000 2>&1 |
          tee "$OUT/tool_tool_$tag.txt" || log "warning: tapegrad train failed ($cfg, $t threads)"
        [[ -f $rundir/metrics.jsonl ]] && cp "$rundir/metrics.jsonl" "$OUT/tool_tool_$tag.jsonl"
        rm -rf "$rundir"  # its checkpoint (weights + AdamW state) is large for small/tiny
        if ((have_torch2)); then
          echo "---- tool $cfg, $t thread(s), run $r/$RUNS: PyTorch 2 eager + torch.compile (shared/bench/torch_lm_modern.py) ----"
          own_threads "$TORCH2" "$TORCH_LM2" --device cpu --modes fp32,fp32c --configs "$cfg" --threads "$t" \
            --steps "$steps" --warmup "$WARM" 2>&1 |
            tee "$OUT/tool_torch2_$tag.txt" | hide_result || log "warning: torch_lm_modern.py failed ($cfg, $t threads)"
        fi
      done
    done
  done
  echo
  "$SYS_PY" bench/combine_tool.py "$OUT" "$WARM"
  exit 0
fi

if [[ $mode == int8sizes ]]; then
  python3 bench/int8_sizes.py --tool build/tools/tapegrad --shared "${BENCH_SHARED:-$ROOT/../shared}" \
    --runs "${BENCH_GEN_RUNS:-5}" ${BENCH_INT8_BEFORE:+--before "$BENCH_INT8_BEFORE"}
  exit 0
fi

if [[ $mode == int8 ]]; then
  python3 bench/int8.py --tool build/tools/tapegrad --large build/bench/bench_large \
    --shared "${BENCH_SHARED:-$ROOT/../shared}" --runs "${BENCH_GEN_RUNS:-3}"
  exit 0
fi

if [[ $mode == generate ]]; then
  TOOL=build/tools/tapegrad
  TRAIN=build/bench/bench_train
  LARGE=build/bench/bench_large
  SHARED=${BENCH_SHARED:-$ROOT/../shared}
  L2C=$SHARED/data/llama2c
  RUNC_SRC=$SHARED/bench/peers/llama2c/run.c
  CORPUS=$SHARED/data/corpora/tinystories_train_head2MiB.txt
  TORCH2=${BENCH_TORCH2:-/opt/torch2/bin/python}
  TORCH_LM2=$SHARED/bench/torch_lm_modern.py
  RUNS=${BENCH_GEN_RUNS:-3}
  GEN=256  # tokens generated per preset row (part 2)
  PROMPT="Once upon a time"
  case "${BENCH_GEN_PRESETS:-all}" in none) presets=() ;; small | tiny) presets=("$BENCH_GEN_PRESETS") ;;
    all) presets=(small tiny) ;; *) log "error: BENCH_GEN_PRESETS must be none, small, tiny or all"; exit 2 ;; esac
  [[ -x $TOOL ]] || { log "error: $TOOL was not built (target tapegrad_tool)"; exit 1; }
  SYS_PY=$(command -v python3 || true)
  [[ -n $SYS_PY ]] || { log "error: python3 is needed (token file, the table)"; exit 1; }
  IFS=, read -ra TLIST <<<"$THREADS"
  # The prefill/decode line of `tapegrad generate` (stderr) and run.c's "achieved tok/s" go to the console;
  # the generated text stays in the raw file.
  # (run.c's stderr line can follow its text on the same line: matched anywhere.)
  # Programs' own RESULT lines stay in their files (the output ends with exactly one, combine_generate.py's).
  show() { grep -oE '^(prefill:|tokens/s:|  of which).*|achieved tok/s: [0-9.]+|"kind": "generate".*"tok_s": [0-9.]+' "$1" || true; }

  # ---- (1) stories260K: ours vs llama2.c's run.c ----
  if [[ -f $L2C/stories260K.bin && -f $L2C/tok512.bin ]]; then
    MODEL=$L2C/stories260K.bin TOK=$L2C/tok512.bin
    "$TOOL" import llama2c "$MODEL" "$TOK" --out "$OUT/s260" >"$OUT/gen_import.txt" 2>&1 ||
      { cat "$OUT/gen_import.txt" >&2; log "error: tapegrad import llama2c failed"; exit 1; }
    CK260=$OUT/s260/checkpoints/step_00000000.safetensors
    have_runc=0
    if [[ -f $RUNC_SRC ]] && command -v gcc >/dev/null; then
      # Built from a copy in the temp directory: gcc -O3 / -Ofast -march=native, each also with -fopenmp.
      mkdir -p "$OUT/llama2c" && cp "$RUNC_SRC" "$OUT/llama2c/run.c"
      if (cd "$OUT/llama2c" && gcc -O3 -o run run.c -lm && gcc -Ofast -march=native -o runfast run.c -lm &&
        gcc -O3 -fopenmp -o run_omp run.c -lm && gcc -Ofast -march=native -fopenmp -o runfast_omp run.c -lm); then
        have_runc=1
      else
        log "warning: run.c did not compile: no run.c columns"
      fi
    else
      log "run.c ($RUNC_SRC) or gcc missing: no run.c columns"
    fi
    for t in "${TLIST[@]}"; do
      for ((r = 1; r <= RUNS; r++)); do
        tag=${t}_$r
        echo "---- generate stories260K, $t thread(s), run $r/$RUNS: tapegrad generate ----"
        own_threads "$TOOL" generate --checkpoint "$CK260" --prompt "$PROMPT" --greedy --max-tokens 196 \
          --threads "$t" >"$OUT/gen_s260_ours_$tag.txt" 2>&1 || log "warning: tapegrad generate failed ($t threads)"
        show "$OUT/gen_s260_ours_$tag.txt"
        if ((have_runc)); then
          for v in run runfast; do
            bin=$OUT/llama2c/$v
            ((t > 1)) && bin=${bin}_omp
            echo "---- generate stories260K, $t thread(s), run $r/$RUNS: llama2.c $(basename "$bin") ----"
            env -u OPENBLAS_NUM_THREADS OMP_NUM_THREADS="$t" "$bin" "$MODEL" -z "$TOK" -t 0.0 -n 200 -i "$PROMPT" \
              >"$OUT/gen_s260_${v}_$tag.txt" 2>&1 || log "warning: $bin failed ($t threads)"
            show "$OUT/gen_s260_${v}_$tag.txt"
          done
        fi
      done
    done
  else
    log "no $L2C/stories260K.bin + tok512.bin: stories260K part left out"
  fi

  # ---- (2) small / tiny, random weights: ours vs PyTorch 2, beside the bandwidth bound; (3) prefill ----
  if ((${#presets[@]})); then
    have_torch2=0
    if ((PEERS)) && [[ -x $TORCH2 && -f $TORCH_LM2 ]] && "$TORCH2" -c "import torch" 2>/dev/null; then
      have_torch2=1
    else
      log "PyTorch 2 peer missing (needs $TORCH2 with torch, and $TORCH_LM2): no PyTorch 2 column"
    fi
    if [[ -x $LARGE ]]; then
      echo "---- memory bandwidth, 1 thread: bench_large --only mem ----"
      own_threads "$LARGE" --threads 1 --reps 5 --only mem >"$OUT/gen_bw.txt" 2>&1 || log "warning: bench_large failed"
      grep -E '^ +(memcpy|sum_all) ' "$OUT/gen_bw.txt" || true
    else
      log "$LARGE missing: no bandwidth bound"
    fi
    # A vocabulary-10000 tokenizer for generate (the checkpoints are trained on a token file, which has none;
    # corpus/tinystories_head.txt allows only 8064 merges, so the 2 MiB corpus).
    "$TOOL" tokenize train --input "$CORPUS" --vocab-size 10000 --threads 1 --out "$OUT/tok10k" \
      >"$OUT/gen_tokenizer.txt" 2>&1 || { cat "$OUT/gen_tokenizer.txt" >&2; log "error: tokenize train failed"; exit 1; }
    # Uniform random ids in [0, 10000), data/token_file.h's format: one training step's worth and more.
    "$SYS_PY" - "$OUT/random_10000.bin" <<'PYEOF'
import array, random, struct, sys
vocab, n = 10000, 1 << 16
ids = array.array("H", random.Random(vocab).choices(range(vocab), k=n))
if sys.byteorder == "big":
    ids.byteswap()
with open(sys.argv[1], "wb") as f:
    f.write(b"TGTOKENS" + struct.pack("<IIQQ", 1, 2, n, vocab))
    ids.tofile(f)
PYEOF
    for cfg in "${presets[@]}"; do
      # Random weights after one training step. small's context (128) is raised to 256: the model PyTorch's
      # --gen 256 times (it uses context max(preset, 256)); the weights are the same shapes either way.
      ctx_args=()
      [[ $cfg == small ]] && ctx_args=(--context "$GEN")
      own_threads "$TOOL" train --model "$cfg" "${ctx_args[@]}" --train "$OUT/random_10000.bin" --steps 1 \
        --batch-size 1 --threads 1 --out "$OUT/ck_$cfg" >"$OUT/gen_train_$cfg.txt" 2>&1 ||
        { tail -5 "$OUT/gen_train_$cfg.txt" >&2; log "error: tapegrad train ($cfg) failed"; exit 1; }
      CK=$OUT/ck_$cfg/checkpoints/step_00000001.safetensors
      "$TOOL" info --checkpoint "$CK" >"$OUT/gen_info_$cfg.txt" 2>&1 || true
      ctx=$(awk '$1 == "context_length" {print $3}' "$OUT/gen_info_$cfg.txt")
      # The prompt's length P with this tokenizer (a 1-token run): P + max_tokens − 1 positions must fit.
      own_threads "$TOOL" generate --checkpoint "$CK" --tokenizer "$OUT/tok10k" --prompt "Once" --greedy \
        --max-tokens 1 --threads 1 >"$OUT/gen_probe_$cfg.txt" 2>&1 || true
      p=$(sed -n 's/^prefill: \([0-9]*\) tokens.*/\1/p' "$OUT/gen_probe_$cfg.txt")
      maxt=$GEN
      ((${p:-1} + GEN - 1 > ${ctx:-$GEN})) && maxt=$((${ctx:-$GEN} - ${p:-1} + 1))
      for ((r = 1; r <= RUNS; r++)); do
        tag=${cfg}_1_$r
        echo "---- generate $cfg (context ${ctx:-?}), 1 thread, run $r/$RUNS: tapegrad generate, $maxt tokens ----"
        own_threads "$TOOL" generate --checkpoint "$CK" --tokenizer "$OUT/tok10k" --prompt "Once" --greedy --no-stop \
          --max-tokens "$maxt" --threads 1 >"$OUT/gen_lm_ours_$tag.txt" 2>&1 || log "warning: generate failed ($cfg)"
        show "$OUT/gen_lm_ours_$tag.txt"
        if ((have_torch2)); then
          echo "---- generate $cfg, 1 thread, run $r/$RUNS: PyTorch 2 (torch_lm_modern.py --gen $GEN) ----"
          own_threads "$TORCH2" "$TORCH_LM2" --device cpu --modes "" --gen "$GEN" --configs "$cfg" --threads 1 \
            >"$OUT/gen_lm_torch2_$tag.txt" 2>&1 || log "warning: torch_lm_modern.py failed ($cfg)"
          show "$OUT/gen_lm_torch2_$tag.txt"
        fi
        if [[ $cfg == tiny ]]; then
          # (3) prefill: a prompt longer than the context, cut by sliding (the default) to its last context tokens
          # (context − 1 before issue 38).
          head -c 8192 "$CORPUS" >"$OUT/prompt_long.txt"
          echo "---- prefill tiny, 1 thread, run $r/$RUNS: tapegrad generate --prompt-file (cut to ${ctx:-256} tokens) ----"
          own_threads "$TOOL" generate --checkpoint "$CK" --tokenizer "$OUT/tok10k" --prompt-file "$OUT/prompt_long.txt" \
            --sliding --greedy --no-stop --max-tokens 1 --threads 1 >"$OUT/gen_prefill_ours_1_$r.txt" 2>&1 ||
            log "warning: prefill run failed"
          show "$OUT/gen_prefill_ours_1_$r.txt"
          if [[ -x $TRAIN ]]; then
            echo "---- prefill tiny, 1 thread, run $r/$RUNS: bench_train (training forward + loss) ----"
            own_threads "$TRAIN" --config tiny --threads 1 --steps "${BENCH_STEPS:-3}" --warmup 1 \
              >"$OUT/gen_prefill_train_1_$r.txt" 2>&1 || log "warning: bench_train failed"
            show "$OUT/gen_prefill_train_1_$r.txt"
          fi
        fi
      done
    done
  fi
  echo
  "$SYS_PY" bench/combine_generate.py "$OUT"
  exit 0
fi

echo
# Combine: tables with both sides and the ratios, then the one RESULT line.
COMBINE_PY=$PY
[[ -x $COMBINE_PY ]] || COMBINE_PY=$(command -v python3 || true)
if [[ -n $COMBINE_PY ]]; then
  "$COMBINE_PY" bench/combine.py "$mode" "$OUT"
else
  # No Python at all: print our own RESULT lines, merged by hand.
  o=$(grep -h '^RESULT ' "$OUT"/ours_overhead.txt 2>/dev/null | sed 's/^RESULT //' || true)
  l=$(grep -h '^RESULT ' "$OUT"/ours_large.txt 2>/dev/null | sed 's/^RESULT //' || true)
  echo "(no python3: ours alone, no combined table)"
  echo "RESULT {\"mode\":\"$mode\",\"overhead\":{\"tapegrad\":${o:-null}},\"large\":{\"tapegrad\":${l:-null}}}"
fi
