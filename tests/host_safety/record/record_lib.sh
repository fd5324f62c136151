# Helpers of the tests/host_safety/record scenarios. Sourced after ../../scenario_lib.sh.
#
# $STRATA is the strata binary (by hand: STRATA_CLI=/path/to/strata overrides it, and
# STRATA_RECORD_LIB / STRATA_BASE_LIB choose the libraries it preloads, e.g. to check that a
# test fails with an older build).
STRATA="${STRATA_CLI:-$(binary tools/strata/strata)}"
export STRATA_BASE_LIB="${STRATA_BASE_LIB:-$STRATA_LIB}"
export STRATA_NO_PROGRESS=1

SUPERVISOR="$(binary tests/host_safety/record/supervisor)"

# The runs below go through the supervisor (supervisor.cc): their stdout is the program's,
# then the supervisor's exact verdict ("supervisor: child exited N" / "killed by signal N"),
# so comparing stdout compares how the process ended too. RUN_STATUS is the supervisor's.

# run_plain NAME CMD...: CMD without Strata, stdout/stderr to $WORK/NAME.*.
run_plain() {
  local name="$1"
  shift
  timeout -k 5 120 "$SUPERVISOR" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  RUN_STATUS=$?
}

# run_preloaded NAME CMD...: CMD with the base library preloaded, STRATA_STARTUP=1, the
# profile to $OUT/NAME.json.
run_preloaded() {
  local name="$1"
  shift
  timeout -k 5 120 "$SUPERVISOR" env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
    STRATA_SHUTDOWN="$OUT/$name.json" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  RUN_STATUS=$?
}

# run_recorded NAME CMD...: `strata record -q -o $OUT/NAME.json -- CMD`.
run_recorded() {
  local name="$1"
  shift
  timeout -k 5 120 "$SUPERVISOR" env "${SANITIZER_ENV[@]}" "$STRATA" record -q -o "$OUT/$name.json" -- "$@" \
    >"$WORK/$name.out" 2>"$WORK/$name.err"
  RUN_STATUS=$?
}

# verdict NAME: the supervisor's last line of run NAME.
verdict() { grep '^supervisor: child' "$WORK/$1.out" | tail -1 | sed 's/^supervisor: child //'; }

# same_as_plain NAME PLAIN_NAME: the run NAME ended as the plain run did and printed the same
# stdout. Returns 1 (after a FAIL line) otherwise.
same_as_plain() {
  local name="$1" plain="$2"
  if [[ "$RUN_STATUS" -ne 0 ]]; then
    fail "$name: the supervisor ended with status $RUN_STATUS (timeout?)"
    return 1
  fi
  if [[ "$(verdict "$name")" != "$(verdict "$plain")" ]]; then
    fail "$name: $(verdict "$name"), plain: $(verdict "$plain")"
    sed 's/^/    stdout: /' "$WORK/$name.out" | head -10
    sed 's/^/    stderr: /' "$WORK/$name.err" | head -10
    return 1
  fi
  if ! cmp -s "$WORK/$name.out" "$WORK/$plain.out"; then
    fail "$name: stdout differs from the plain run"
    diff "$WORK/$plain.out" "$WORK/$name.out" | head -10 | sed 's/^/    /'
    return 1
  fi
  return 0
}
