#!/usr/bin/env bash
# The full tier's own session and who gathers children (issue 35, in_charge.cc).
# Usage: in_charge_test.sh repeat|listen
source "$(dirname "$0")/../scenario_lib.sh"

mode="${1:?mode}"
PROGRAM="$(binary tests/ipc/in_charge)"
export STRATA_IPC_DIR=/tmp STRATA_LOGGING=1
unset STRATA_IPC_PARENT STRATA_STARTUP

timeout 60 "$PROGRAM" "$mode" > "$WORK/out.log" 2> "$WORK/err.log"
status=$?
cat "$WORK/out.log"
sed 's/^/stderr: /' "$WORK/err.log" | head -40
((status == 0)) && grep -q "in_charge: ok" "$WORK/out.log" && pass "in-process checks ($mode)" \
  || fail "in-process checks ($mode) (status $status)"
if [[ "$mode" == repeat ]]; then
  # Base's log names each real takeover; a repeated start is none (two real ones above).
  took=$(grep -c "took over the running session" "$WORK/err.log")
  ((took == 2)) && pass "the log names the 2 real takeovers only" \
    || fail "the log names $took takeovers (2 real ones)"
else
  refused=$(grep -c "StartIpcParent: not listening for children" "$WORK/err.log")
  ((refused >= 3)) && pass "each refused StartIpcParent is logged ($refused)" \
    || fail "$refused log lines for 3 refused StartIpcParent calls"
  grep -q "the child is spawned without profiling" "$WORK/err.log" \
    && pass "SpawnProfiledChild logged that its child is not profiled" \
    || fail "SpawnProfiledChild did not say its child is not profiled"
fi
finish
