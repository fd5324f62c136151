#!/usr/bin/env bash
# Scenario: `strata record` with the flight recorder (issue 21): flight_parent starts three
# flight_program children and SIGKILLs one of them mid-run (after its 1000 ms of work per
# thread). The merged profile holds the parent and all three children; the killed one is
# recovered from its flight recorder file with its data up to the kill and a "Process
# crashed" marker; the two that ended normally have none. strata's exit status is the
# parent's (0). With --no-flight-recorder the killed child is missing (what the feature adds).
# Then children that exec twice before they crash (several files per pid: the last image's is
# the one recovered) and one that ends its session cleanly (exec_check.py).
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
PROGRAM="$(binary tests/flight/flight_program)"
PARENT="$(binary tests/flight/flight_parent)"
HERE="$(dirname "$(readlink -f "$0")")"
export STRATA_BASE_LIB="$STRATA_LIB"
export STRATA_NO_PROGRESS=1

ulimit -S -c 0  # The exec case's SIGSEGVs dump no core.

for variant in recorder no-recorder; do
  rm -f "$WORK/$variant.ready"
  flags=()
  [[ $variant == no-recorder ]] && flags=(--no-flight-recorder)
  timeout -s KILL 300 env "${SANITIZER_ENV[@]}" "$STRATA" record "${flags[@]}" -o "$OUT/$variant.json" -- \
    "$PARENT" "$PROGRAM" "$WORK/$variant.ready" >"$WORK/$variant.out" 2>"$WORK/$variant.err"
  status=$?
  sed 's/^/    /' "$WORK/$variant.out" "$WORK/$variant.err"
  killed=$(sed -n 's/^flight_parent: killed pid \([0-9]*\)$/\1/p' "$WORK/$variant.out")
  if [[ $status -ne 0 || -z "$killed" || ! -s "$OUT/$variant.json" ]]; then
    fail "$variant: strata record status $status, killed pid '$killed', profile $(ls "$OUT/$variant.json" 2>&1)"
    continue
  fi
  pass "$variant: strata record exit 0 (the parent's), child $killed killed"
  if [[ $variant == recorder ]]; then
    check_format "$variant"
    if FLIGHT_CHECK_UNDER_TSAN=$UNDER_TSAN PYTHONPATH="$HERE" python3 "$HERE/record_check.py" "$OUT/$variant.json" "$killed" "$WORK/$variant.out" >"$WORK/$variant.check" 2>&1; then
      pass "$variant: all three children in the profile, the killed one recovered up to the kill"
    else
      fail "$variant: the merged profile falls short:"
    fi
    sed 's/^/    /' "$WORK/$variant.check"
    grep '^RESULT' "$WORK/$variant.check"
    # The front-end's own importer takes every thread of every process (7: the parent's and
    # two per child).
    cli_js="$HERE/../frontend/node_modules/@firefox-devtools/profiler-cli/dist/profiler-cli.js"
    session_dir=$(mktemp -d /tmp/strata-pq.XXXXXX)
    PROFILER_CLI_SESSION_DIR="$session_dir" node "$HERE/../frontend_threads.js" "$cli_js" \
      "$OUT/$variant.json" 7 >"$WORK/$variant.frontend" 2>&1
    frontend_status=$?
    PROFILER_CLI_SESSION_DIR="$session_dir" node "$cli_js" stop --all >/dev/null 2>&1 || true
    rm -rf "$session_dir"
    sed 's/^/    /' "$WORK/$variant.frontend"
    [[ $frontend_status -eq 0 ]] && pass "$variant: the front-end imports all 7 threads of the 4 processes" \
      || fail "$variant: the front-end import failed"
  else
    if FLIGHT_CHECK_UNDER_TSAN=$UNDER_TSAN PYTHONPATH="$HERE" python3 "$HERE/record_check.py" "$OUT/$variant.json" "$killed" "$WORK/$variant.out" >"$WORK/$variant.check" 2>&1; then
      fail "$variant: the killed child is in the profile without the flight recorder?"
    else
      pass "$variant: without the flight recorder the killed child is missing (as before issue 21)"
    fi
    grep '^RESULT\|^FAIL' "$WORK/$variant.check" | sed 's/^/    /'
  fi
done

# --- Several files per pid: each of three children execs twice (sh -> sh -> flight_program)
# then dies by SIGSEGV; a fourth ends its session (ProfilerStop) and crashes; a fifth ends its
# session and _exits (no file left: it did not crash, issue 33). Per pid only the newest file
# (the last image's) is recovered, the older ones removed; the clean end is not reported as a
# crash.
timeout -s KILL 300 env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$OUT/exec.json" -- \
  "$HERE/exec_children.sh" "$PROGRAM" >"$WORK/exec.out" 2>"$WORK/exec.err"
status=$?
sed 's/^/    /' "$WORK/exec.out" "$WORK/exec.err"
if [[ $status -ne 0 || ! -s "$OUT/exec.json" ]]; then
  fail "exec: strata record status $status, profile $(ls "$OUT/exec.json" 2>&1)"
else
  check_format exec
  if FLIGHT_CHECK_UNDER_TSAN=$UNDER_TSAN PYTHONPATH="$HERE" python3 "$HERE/exec_check.py" "$OUT/exec.json" "$WORK/exec.out" >"$WORK/exec.check" 2>&1; then
    pass "exec: each pid recovered from its last image's file (3 crashed, 1 recording ended)"
  else
    fail "exec: the recovered processes are not the last images':"
  fi
  sed 's/^/    /' "$WORK/exec.check"
  grep '^RESULT' "$WORK/exec.check"
fi

finish
