#!/usr/bin/env bash
# Host safety, fork with the full tier (issue 16; docs/session.md "fork"): fork_full_program
# starts the full tier (session, IPC parent, monitor) and keeps its locks busy from four
# threads while it forks 100 children that call the full tier's API (StartFull, StopFull,
# ShutdownFull, the IPC calls, the monitor, ProfilerSaveProfile). Every child must exit in
# time with status 0 (the program kills children still running 60 s after its last fork and
# reports them as hung). Run as is (the program links the tier and starts it itself) and with
# the base library preloaded and STRATA_STARTUP=1 (full then takes over base's session).
# Without the fork checks, 89-90 of 100 children hung.
source "$(dirname "$0")/../scenario_lib.sh"

program="$(binary tests/host_safety/fork_full_program)"
children=100
expected="fork_full: children=$children exited=$children hung=0 wrong_status=0"

for name in linked preload; do
  prefix=()
  [[ $name == preload ]] && prefix=(env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1)
  timeout -s KILL 180 "${prefix[@]}" "$program" "$children" >"$WORK/$name.out" 2>"$WORK/$name.err"
  RUN_STATUS=$?
  cp "$WORK/$name.out" "$WORK/$name.err" "$OUT/" 2>/dev/null || true
  result "scenario=host-fork-full run=$name status=$RUN_STATUS $(sed -n 's/^fork_full: //p' "$WORK/$name.out")"
  if [[ $RUN_STATUS -eq 0 && "$(cat "$WORK/$name.out")" == "$expected" ]]; then
    pass "$name: every child exited in time with status 0"
  else
    fail "$name: status $RUN_STATUS, output: $(cat "$WORK/$name.out")"
    sed 's/^/    /' "$WORK/$name.err" | head -20
  fi
done

finish
