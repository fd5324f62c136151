#!/usr/bin/env bash
# Host-safety scenarios of multi-process profiling (issue 16, docs/ipc.md "Limits on what
# peers can do"). Usage: ipc_abuse_test.sh emfile|exits|cycle|closerange|backlog|churn|churn_quiet
source "$(dirname "$0")/../scenario_lib.sh"

mode="${1:?mode}"
PROGRAM="$(binary tests/ipc/ipc_abuse)"
export STRATA_IPC_DIR=/tmp
unset STRATA_IPC_PARENT STRATA_STARTUP STRATA_LOGGING
# churn: every IPC line the peer causes is wanted (the program counts them itself).
[[ "$mode" == churn ]] && export STRATA_LOGGING=1

# Bounded in time: the unfixed parent spun in accept() forever (and its exit save waited).
timeout 60 "$PROGRAM" "$mode" "$OUT/$mode.json" > "$WORK/out.log" 2> "$WORK/err.log"
status=$?
cat "$WORK/out.log"
sed 's/^/stderr: /' "$WORK/err.log" | head -40
lines=$(wc -l < "$WORK/err.log")
bytes=$(wc -c < "$WORK/err.log")
result "stderr_lines=$lines stderr_bytes=$bytes status=$status"
((status == 0)) && grep -q "ipc_abuse: ok" "$WORK/out.log" && pass "in-process checks ($mode)" \
  || fail "in-process checks ($mode) (status $status)"
grep "^RESULT" "$WORK/out.log" | sed 's/^RESULT //' | while read -r line; do result "$line"; done
# The log stays small whatever the peers do (the unfixed parent wrote one line per failed
# accept: tens of MB).
((lines <= 60)) && pass "the log stays small ($lines lines)" || fail "the log has $lines lines"
if [[ "$mode" == backlog ]]; then
  # The child says why it profiles alone.
  grep -q "cannot join the parent's session.*backlog" "$WORK/err.log" \
    && pass "the child logged why it did not join (the parent's backlog)" \
    || fail "no log line says the child gave up on the parent's full backlog"
fi
if [[ "$mode" == closerange ]]; then
  # The child says once that the program took its connection, and nothing more about it.
  said=$(grep -c "closed by the program" "$WORK/err.log")
  ((said >= 1 && said <= 2)) && pass "the child logged the lost connection once ($said)" \
    || fail "the child logged the lost connection $said times"
fi
finish
