#!/usr/bin/env bash
# run.sh — the main job on its embedded default: installs what is missing, builds, then trains a small
# language model on the TinyStories excerpt kept in corpus/ (on the CPU, about 2½ minutes on 2 cores after the build):
#   1. tapegrad tokenize train   a byte-level BPE tokenizer (vocab 2048) on the corpus
#   2. tapegrad train            a 1.4M-parameter TransformerLM (QK-norm) trained with --recipe modern (Muon for
#                                the blocks' matrices, AdamW at 3e-3 for the rest, warmup-stable-decay); the last
#                                10 % of the stories are held out, evaluated every 100 steps; progress line,
#                                metrics.jsonl, loss.svg
#   3. tapegrad eval             the best checkpoint on the held-out stories
#   4. tapegrad generate         a short story from "Once upon a time" (KV cache, top-p sampling)
# Everything lands in runs/tinystories/ (TAPEGRAD_RUN_DIR overrides). Run it again after an interruption
# (Ctrl-C writes a checkpoint) and it resumes where it stopped; a finished run is only evaluated again.
# With arguments, they go to the tool instead: scripts/run.sh info, scripts/run.sh demo, scripts/run.sh train --help
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/stages.sh
# One status line per setup stage (logs under build/logs/, shown when a stage fails); on stderr when
# the arguments go to the tool, so its own output stays clean.
{
  stage "dependencies (Debian packages)" scripts/deps.sh
  stage "build (build/)" scripts/build.sh
} >&$((($# > 0) ? 2 : 1))
source scripts/blas_env.sh
tool=build/tools/tapegrad
if (($# > 0)); then exec "$tool" "$@"; fi

corpus=corpus/tinystories_head.txt
run=${TAPEGRAD_RUN_DIR:-runs/tinystories}
mkdir -p "$run"
if [[ ! -f "$run/tokenizer/tokenizer.json" ]]; then
  stage "BPE tokenizer (vocab 2048) on $corpus" "$tool" tokenize train --input "$corpus" --vocab-size 2048 \
    --out "$run/tokenizer"
fi
echo "training (progress line below; Ctrl-C writes a checkpoint, run again to resume):"
resume=()
if compgen -G "$run/checkpoints/step_*.safetensors" >/dev/null; then resume=(--resume); fi
"$tool" train --text "$corpus" --tokenizer "$run/tokenizer" \
  --context 128 --d-model 128 --layers 4 --heads 4 --batch-size 16 \
  --recipe modern --steps 800 --lr 3e-3 --warmup-steps 50 --eval-every 100 --checkpoint-every 100 \
  --out "$run" "${resume[@]}"
"$tool" eval --checkpoint "$run/checkpoints/best.safetensors" --text "$corpus" --held-out 0.1
echo
"$tool" generate --checkpoint "$run/checkpoints/best.safetensors" --prompt "Once upon a time" --max-tokens 120 --seed 1
echo
echo
echo "done: tokenizer trained, model trained and evaluated on the held-out 10 %, a story generated."
echo "run directory: $run (metrics.jsonl, loss.svg — open it in a browser — config.json, checkpoints/);"
echo "the tool: $tool (build/tools/tapegrad --help); setup logs: $STAGE_LOG_DIR/"
