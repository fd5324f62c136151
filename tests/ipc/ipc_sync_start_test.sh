#!/usr/bin/env bash
# StartFull() in a child is synchronous (issue 17, docs/ipc.md "Sequences"): 100 children, each
# spawned at once after its parent started listening or started a new session; right after
# StartFull() returns in the child, ProfilerIsActive() is true and a marker recorded on the next
# line is in the profile the parent gathers. STRATA_TEST_LOAD=auto (the _loaded_test twin) runs
# 2 busy processes per CPU beside it.
source "$(dirname "$0")/../scenario_lib.sh"

PROGRAM="$(binary tests/ipc/ipc_sync_start)"
export STRATA_IPC_DIR=/tmp
unset STRATA_IPC_PARENT STRATA_STARTUP
rounds=50  # Two children each.
# Under TSan each child's start-up (TSan's and Strata's) takes seconds at a load of 25: 100
# children ran past 570 s and failed with nothing printed (the 600 s watchdog). 10 rounds there.
((UNDER_TSAN)) && rounds=10

timeout 600 "$PROGRAM" parent "$rounds" "$OUT" > "$WORK/parent.log" 2> "$WORK/parent.err"
status=$?
grep -v -e "^child .*yes, marker in the gathered profile yes$" -e "^RESULT" "$WORK/parent.log"
sed 's/^/stderr: /' "$WORK/parent.err" | grep -v "ipc: following\|profiler started\|profiler stopped" | head -20
grep "^RESULT" "$WORK/parent.log" | sed 's/^RESULT //' | while read -r line; do result "$line"; done
((status == 0)) && pass "$((2 * rounds)) children: active after StartFull and their first marker gathered" \
  || fail "a child was not active after StartFull, or its first marker is not in the profile"
finish
