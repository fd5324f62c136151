#!/usr/bin/env bash
# Scenario: the demo shows where its threads wait (issue 18), quiet and, as demo_loaded_test,
# with 2 busy processes per CPU beside it.
#
# tools/demo/strata_demo preloaded with STRATA_STARTUP=1 for 2 s, as tools/demo.sh runs it:
# - the profile passes the format checker and the front-end import (io-worker with IoThread);
# - tests/demo_check.py: the renderer, io-worker and compute threads are shown at first by the
#   front-end (its 5 %-of-the-busiest-thread CPU rule), io-worker's samples inside its "Read"
#   intervals wait in a sleep under IoThread, the main thread waits under main;
# - `strata summary` lists io-worker and the main thread with wall and CPU columns;
# - exit status and output are the plain run's.
# Negative control: with wait stacks off (STRATA_STARTUP_FEATURES=-waitstacks) demo_check.py
# fails (blocked time shows copies of the last CPU sample, not the wait).
source "$(dirname "$0")/scenario_lib.sh"

program="$(binary tools/demo/strata_demo)"
checker="$(dirname "$(readlink -f "$0")")/demo_check.py"
[[ -f "$checker" ]] || checker="$_runfiles/tests/demo_check.py"
STRATA="$(binary tools/strata/strata)"

timeout 60 "$program" 2 >"$WORK/plain.out" 2>"$WORK/plain.err"
plain_status=$?
[[ $plain_status -eq 0 ]] || fail "plain run failed (status $plain_status)"

run_profiled preload "$program" 2
show_run preload
[[ $RUN_STATUS -eq $plain_status ]] || fail "preload: exit status $RUN_STATUS, plain $plain_status"
if cmp -s "$WORK/preload.out" "$WORK/plain.out"; then
  pass "preload: output as the plain run's"
else
  fail "preload: output differs from the plain run's"
fi
if [[ -s "$OUT/preload.json" ]]; then
  check_format preload
  python3 "$checker" "$OUT/preload.json" >"$WORK/preload.check" 2>&1
  status=$?
  sed 's/^/    /' "$WORK/preload.check"
  if [[ $status -eq 0 ]]; then
    pass "preload: every thread shown at first; io-worker and main show where they wait"
  else
    fail "preload: demo checks:"
    grep '^FAIL' "$WORK/preload.check" | sed 's/^/    /'
  fi
  if stats preload; then
    check_frontend preload "io-worker:IoThread"
  fi
  if timeout 60 "$STRATA" summary "$OUT/preload.json" >"$WORK/summary.out" 2>&1; then
    sed -n '/^Threads:/,/^$/p' "$WORK/summary.out" | sed 's/^/    /'
    header=$(grep -m1 -E '^ +pid +tid +thread' "$WORK/summary.out")
    if [[ "$header" == *"wall ms"* && "$header" == *"CPU ms"* ]] &&
       grep -qE '^ +[0-9]+ +[0-9]+ +io-worker +[0-9]+ +[0-9.]+ +[0-9.]+' "$WORK/summary.out" &&
       grep -qE '^ +[0-9]+ +[0-9]+ +strata_demo +[0-9]+ +[0-9.]+ +[0-9.]+' "$WORK/summary.out"; then
      pass "strata summary: io-worker and the main thread with wall and CPU columns"
    else
      fail "strata summary: no io-worker / main thread row with wall and CPU columns"
    fi
  else
    fail "strata summary failed: $(head -3 "$WORK/summary.out")"
  fi
else
  fail "preload: no profile written"
fi

# Negative control: without wait stacks the checks see that the waits are not shown.
STRATA_STARTUP_FEATURES=-waitstacks run_profiled control "$program" 1
if [[ -s "$OUT/control.json" ]] && ! python3 "$checker" "$OUT/control.json" >"$WORK/control.check" 2>&1; then
  pass "control: without wait stacks demo_check.py fails ($(grep -c '^FAIL' "$WORK/control.check") failed)"
else
  fail "control: demo_check.py passed (or no profile) without wait stacks"
fi

finish
