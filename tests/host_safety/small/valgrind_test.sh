#!/usr/bin/env bash
# A preloaded program runs under Valgrind as it does without Strata. Valgrind runs only the
# clone() calls of thread creation, fork and vfork, and ends the program on any other
# ("Valgrind does not support general clone()"): Strata's descriptor helper (a CLONE_VM |
# CLONE_FILES | CLONE_VFORK process, platform/private_fd.h) did that at the session's start.
# Under Valgrind Strata now keeps its descriptors below the limit instead (its fallback share).
# valgrind_worker (a plain two-thread program) runs under `valgrind --tool=none` plain and
# with the library preloaded and a session started: same exit status and output, no
# unsupported-clone message, and a profile the format checker accepts with both threads.
source "$(dirname "$0")/../../scenario_lib.sh"

program="$(binary tests/host_safety/small/valgrind_worker)"
command -v valgrind >/dev/null || fail "valgrind is not installed (tools/setup.sh installs it)"
if [[ -n "$SANITIZER" ]]; then
  echo "skipped under $SANITIZER: Valgrind does not run a sanitizer's runtime"
  finish
fi
count=4000000

# Valgrind's own messages go to a log file; the program's output and status are compared.
timeout 600 valgrind --tool=none --log-file="$WORK/plain.vg" "$program" "$count" \
  >"$WORK/plain.out" 2>"$WORK/plain.err"
plain_status=$?
[[ "$plain_status" -eq 0 ]] || fail "plain under Valgrind: status $plain_status: $(tail -5 "$WORK/plain.vg")"

# The library is preloaded into the traced child (not into `env`, which Valgrind also runs).
timeout 600 valgrind --tool=none --trace-children=yes --log-file="$WORK/preloaded.vg" \
  /usr/bin/env STRATA_STARTUP=1 STRATA_SHUTDOWN="$WORK/preloaded.json" \
  LD_PRELOAD="$STRATA_PRELOAD" "$program" "$count" >"$WORK/preloaded.out" 2>"$WORK/preloaded.err"
status=$?
if [[ "$status" -eq "$plain_status" ]] && cmp -s "$WORK/plain.out" "$WORK/preloaded.out"; then
  pass "preloaded under Valgrind: exit status $status and output as without Strata"
else
  fail "preloaded under Valgrind: status $status (plain $plain_status), output: $(head -3 "$WORK/preloaded.out"); Valgrind: $(grep -m3 -i 'unsupported\|unimplemented\|exit now' "$WORK/preloaded.vg")"
fi
if grep -q "Unsupported clone" "$WORK/preloaded.vg"; then
  fail "Valgrind refused a clone() of Strata's: $(grep -m1 'Unsupported clone' "$WORK/preloaded.vg")"
else
  pass "no clone() Valgrind refuses"
fi
if [[ -s "$WORK/preloaded.json" ]]; then
  if "$GECKO_CHECK" "$WORK/preloaded.json" >"$WORK/check.txt" 2>&1; then
    pass "the profile saved under Valgrind passes the format checker"
  else
    fail "the checker rejects the profile saved under Valgrind: $(head -5 "$WORK/check.txt")"
  fi
  threads=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["threads"]))' "$WORK/preloaded.json")
  result "case=valgrind threads=$threads"
  [[ "$threads" -ge 3 ]] && pass "the main thread and both workers are in the profile ($threads threads)" \
    || fail "$threads threads in the profile, expected the main thread and two workers"
else
  fail "no profile saved under Valgrind"
fi

finish
