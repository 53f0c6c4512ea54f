#!/bin/sh
# llama2c_check.sh TAPEGRAD WORKDIR SHARED_DIR — `tapegrad import llama2c` + `tapegrad generate --greedy`
# must print exactly the text llama2.c's own run.c prints for stories260K.bin / tok512.bin at
# temperature 0 (run.c built here from ../shared/bench/peers/llama2c/run.c with gcc).
# Exit 77 (skipped) when gcc or the shared files are missing (exit 1 under TAPEGRAD_REQUIRE_SHARED=1).
set -eu
tool=$1; work=$2; shared=$3
model=$shared/data/llama2c/stories260K.bin
tok=$shared/data/llama2c/tok512.bin
runc=$shared/bench/peers/llama2c/run.c
command -v gcc >/dev/null 2>&1 || { echo "SKIP: no gcc"; exit 77; }
for f in "$model" "$tok" "$runc"; do
  [ -f "$f" ] && continue
  # CI (TAPEGRAD_REQUIRE_SHARED=1) must never skip a reference check: a missing fixture fails there.
  if [ "${TAPEGRAD_REQUIRE_SHARED:-0}" = 1 ]; then echo "missing fixture $f (TAPEGRAD_REQUIRE_SHARED=1)"; exit 1; fi
  echo "SKIP: $f is missing (../shared is not beside this clone)"; exit 77
done
mkdir -p "$work"
gcc -O2 -o "$work/run" "$runc" -lm
prompt="Once upon a time"
steps=200
# run.c: -n counts positions, the prompt's included; its stderr holds only "achieved tok/s".
"$work/run" "$model" -z "$tok" -t 0.0 -n $steps -i "$prompt" > "$work/runc.out" 2> "$work/runc.err"
rm -rf "$work/imported"
"$tool" import llama2c "$model" "$tok" --out "$work/imported"
# run.c feeds the prompt's P ids (BOS included) at positions 0..P-1 and samples at positions P-1..steps-1:
# steps - P + 1 tokens. "Once upon a time" is P = 5 ids with tok512.bin (tests/test_llama2c.cpp).
n=$((steps - 5 + 1))
OMP_NUM_THREADS=1 "$tool" generate --checkpoint "$work/imported/checkpoints/step_00000000.safetensors" \
  --prompt "$prompt" --greedy --max-tokens $n --threads 1 > "$work/tapegrad.out" 2> "$work/tapegrad.err"
cat "$work/tapegrad.err"
# run.c prints its decoding of the prompt ids ("Once upon a time", the dummy-prefix space dropped after
# BOS), then the generated text, then "\n"; tapegrad generate prints the prompt as given, the text, "\n".
if cmp "$work/runc.out" "$work/tapegrad.out"; then
  echo "identical: $(wc -c < "$work/tapegrad.out") bytes"
else
  echo "run.c:"; cat "$work/runc.out"; echo "tapegrad:"; cat "$work/tapegrad.out"
  exit 1
fi
