# stages.sh — sourced by scripts/test.sh and scripts/run.sh: each step of a script is a "stage" that
# prints one status line (name, ok/FAILED, seconds, its log); the stage's whole output goes to a log
# file under build/logs/ and is shown (its last 80 lines) only when the stage fails, which ends the
# script with the stage's exit code. stage_summary prints every stage's time at the end.
#   stage "build (GCC, build/)" scripts/build.sh
STAGE_LOG_DIR=${STAGE_LOG_DIR:-build/logs}
STAGE_SUMMARY=()
STAGE_START=$SECONDS

stage() {
  local name=$1
  shift
  mkdir -p "$STAGE_LOG_DIR"
  local slug=${name//[^A-Za-z0-9_.+-]/_}
  local log=$STAGE_LOG_DIR/${slug}.log start=$SECONDS rc=0
  printf '%-46s ' "$name"
  "$@" >"$log" 2>&1 || rc=$?
  local took=$((SECONDS - start))
  if ((rc != 0)); then
    printf 'FAILED (exit %d, %ds); the last lines of %s:\n' "$rc" "$took" "$log"
    tail -n 80 "$log" | sed 's/^/  | /'
    STAGE_SUMMARY+=("$(printf '%-46s FAILED %5ds' "$name" "$took")")
    stage_summary
    exit "$rc"
  fi
  # ctest's verdict, when the stage ran ctest ("100% tests passed, 0 tests failed out of 393").
  local verdict
  verdict=$(grep -E 'tests passed, [0-9]+ tests? failed' "$log" | tail -n 1 || true)
  printf 'ok %5ds  %s%s\n' "$took" "$log" "${verdict:+  — $verdict}"
  STAGE_SUMMARY+=("$(printf '%-46s ok     %5ds' "$name" "$took")")
}

# A stage that was left out, and why (printed like the others, so the summary shows it).
stage_skip() {
  printf '%-46s skipped: %s\n' "$1" "$2"
  STAGE_SUMMARY+=("$(printf '%-46s skipped' "$1")")
}

stage_summary() {
  echo
  echo "stage                                          result  seconds"
  printf '%s\n' "${STAGE_SUMMARY[@]}"
  printf '%-46s        %5ds\n' "total" $((SECONDS - STAGE_START))
}
