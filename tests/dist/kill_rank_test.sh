#!/usr/bin/env bash
# kill_rank_test.sh TOOL CORPUS WORKDIR — ctest "dist: tool: ...": `mpirun -np 2 tapegrad train --distributed`
# on a micro model; once a checkpoint exists, rank 1 is killed with SIGKILL. The job must end by itself
# within the collective timeout (--dist-timeout 10; mpirun usually ends it at once) with a message
# naming the dead rank, and the newest checkpoint must load (`tapegrad info`) and resume.
set -euo pipefail
tool=$1 corpus=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$tool" tokenize train --input "$corpus" --vocab-size 300 --out tok >/dev/null
train=("$tool" train --model micro --text "$corpus" --tokenizer tok --batch-size 4 --checkpoint-every 5
       --out run --distributed --dist-timeout 10 --print-every 1000000)
mpirun -np 2 --oversubscribe "${train[@]}" --steps 100000 >out.txt 2>err.txt &
job=$!
fail() { echo "FAIL: $*"; echo "--- stdout"; tail -5 out.txt; echo "--- stderr"; tail -20 err.txt; kill -9 $job 2>/dev/null || true; exit 1; }

for _ in $(seq 1 600); do
  compgen -G "run/checkpoints/step_*.safetensors" >/dev/null && break
  kill -0 $job 2>/dev/null || fail "the job ended before its first checkpoint"
  sleep 0.1
done
compgen -G "run/checkpoints/step_*.safetensors" >/dev/null || fail "no checkpoint after 60 s"

rank1=""
for p in $(pgrep -f "tapegrad train --model micro" || true); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then rank1=$p; fi
done
[[ -n $rank1 ]] || fail "rank 1's process not found"
kill -9 "$rank1"
start=$SECONDS
for _ in $(seq 1 300); do
  kill -0 $job 2>/dev/null || break
  sleep 0.1
done
kill -0 $job 2>/dev/null && fail "the job still runs 30 s after rank 1 was killed (hang)"
rc=0
wait $job || rc=$?
took=$((SECONDS - start))
[[ $rc -ne 0 ]] || fail "the job exited 0 although rank 1 was killed"
grep -qiE "signal 9|killed|rank 1|timed out|no answer" err.txt || fail "no message names what happened"
echo "job ended ${took}s after rank 1 was killed, exit $rc; its message:"
grep -iE "signal 9|killed|no answer" err.txt | head -3

newest=$(ls run/checkpoints/step_*.safetensors | sort | tail -1)
"$tool" info --checkpoint "$newest" >info.txt || fail "the newest checkpoint $newest does not load"
step=$(basename "$newest" .safetensors)
step=$((10#${step#step_}))
# and the run resumes from it on 2 ranks, for 2 more steps
mpirun -np 2 --oversubscribe "${train[@]}" --steps $((step + 2)) --resume >resume.txt 2>resume_err.txt ||
  { cat resume_err.txt; fail "resume from $newest failed"; }
grep -q "resumed from .* at step $step" resume.txt || fail "resume did not start at step $step"
compgen -G "run/checkpoints/step_*$((step + 2)).safetensors" >/dev/null || fail "no checkpoint after the resumed steps"
echo "PASS: checkpoint $newest loaded and resumed to step $((step + 2))"
