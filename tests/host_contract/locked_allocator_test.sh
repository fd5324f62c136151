#!/usr/bin/env bash
# No re-entry into the program (issue 33; docs/host-contract.md): locked_allocator_program,
# whose operator new/delete, malloc family and write are its own, locked and slow, run plain,
# preloaded with each feature set and sampling source, with the flight recorder, and under
# `strata record`. Each run must:
#   - end (a watchdog kills a hang after 120 s: the old lock-marker path deadlocked here) with
#     status 0, as plain;
#   - see no nested entry into its locked operator new and no call from libstrata_base.so's
#     code into its allocator or write on any of its own threads (the program counts them),
#     its pthread_create calls and each new thread's registration and unregistration included
#     (only Strata's own threads, named "Strata...", may allocate), and no call into its
#     allocator from any code (glibc's included) on a new thread before its start routine
#     runs (`before_start`: glibc's pthread_getattr_np, once used for the stack bounds,
#     reallocated a CPU set there), and no call into its pthread_mutex_lock, write or allocator
#     from libunwind's code on any thread (`unwinder_calls`: libunwind, which Strata loads for
#     its walks, took its lock through the program's pthread_mutex_lock at every step, in the
#     sampling handler: 3 689-6 485 calls a run before its imports were redirected); those
#     counts mean something only when the program found libstrata_base.so's and libunwind's
#     code (it prints strata_range=1 unwinder_range=1): a profiled run that did not fails
#     (every session start loads libunwind);
#   - write a profile the format checker accepts; in the runs with wait stacks, when the
#     program itself measured lock waits over 1 ms, the profile has "Awaiting lock" markers
#     (not in precise mode, which ignores waitstacks: docs/env-vars.md).
source "$(dirname "$0")/../scenario_lib.sh"

program="$(binary tests/host_contract/locked_allocator_program)"
STRATA="$(binary tools/strata/strata)"
args=(--threads 4 --seconds 1.5)

timeout -s KILL 120 "$program" "${args[@]}" >"$WORK/plain.out" 2>"$WORK/plain.err"
plain_status=$?
sed 's/^/    /' "$WORK/plain.out"
if [[ $plain_status -ne 0 ]]; then
  fail "plain run: status $plain_status"
  finish
fi

# awaiting_lock_markers PROFILE: the number of "Awaiting lock" markers in every thread.
awaiting_lock_markers() {
  python3 - "$1" <<'PY'
import json, sys
profile = json.load(open(sys.argv[1]))
count = 0
def threads(p):
    for t in p.get("threads", []):
        yield t
    for child in p.get("processes", []):
        yield from threads(child)
for t in threads(profile):
    strings = t.get("stringTable") or t.get("stringArray") or []
    markers = t.get("markers", {})
    schema = markers.get("schema", {})
    name_index = schema.get("name", 0) if isinstance(schema, dict) else 0
    for row in markers.get("data", []):
        name = row[name_index] if isinstance(row, list) else None
        if isinstance(name, int) and 0 <= name < len(strings) and strings[name] == "Awaiting lock":
            count += 1
print(count)
PY
}

# check_run NAME WAITSTACKS: the common checks of one profiled run.
check_run() {
  local name="$1" waitstacks="$2"
  sed 's/^/    /' "$WORK/$name.out"
  result "scenario=locked-allocator run=$name status=$RUN_STATUS $(sed -n 's/^locked_allocator: //p' "$WORK/$name.out")"
  if [[ $RUN_STATUS -eq 137 ]]; then
    fail "$name: the program hung (killed by the watchdog)"
    return
  fi
  if [[ $RUN_STATUS -ne 0 ]]; then
    fail "$name: status $RUN_STATUS, 0 without the profiler"
    sed 's/^/    /' "$WORK/$name.err" | head -20
    return
  fi
  local strata_range unwinder_range
  strata_range=$(sed -n 's/.*strata_range=\([0-9]*\).*/\1/p' "$WORK/$name.out")
  unwinder_range=$(sed -n 's/.*unwinder_range=\([0-9]*\).*/\1/p' "$WORK/$name.out")
  if [[ "$strata_range" != 1 || "$unwinder_range" != 1 ]]; then
    fail "$name: the program did not find libstrata_base.so's code (strata_range=${strata_range:-?}) or libunwind's (unwinder_range=${unwinder_range:-?}): its call counts tested nothing"
    return
  fi
  pass "$name: status 0, no re-entry into the program's allocator, write or pthread_mutex_lock (libstrata_base.so's and libunwind's code found)"
  check_format "$name"
  local waits markers
  waits=$(sed -n 's/.*waits_over_1ms=\([0-9]*\).*/\1/p' "$WORK/$name.out")
  if [[ "$waitstacks" == 1 && "${waits:-0}" -gt 0 ]]; then
    markers=$(awaiting_lock_markers "$OUT/$name.json")
    if [[ "$markers" -gt 0 ]]; then
      pass "$name: $markers 'Awaiting lock' markers (the program waited over 1 ms $waits times)"
    else
      fail "$name: no 'Awaiting lock' marker, but the program waited over 1 ms $waits times"
    fi
  fi
}

run_with() {  # NAME WAITSTACKS ENV...
  local name="$1" waitstacks="$2"
  shift 2
    # The watchdog outside the preload: only the program is profiled (env execs it).
  timeout -s KILL 120 env "$@" LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
    STRATA_SHUTDOWN="$OUT/$name.json" "$program" "${args[@]}" >"$WORK/$name.out" 2>"$WORK/$name.err"
  RUN_STATUS=$?
  cp "$WORK/$name.out" "$WORK/$name.err" "$OUT/" 2>/dev/null || true
  check_run "$name" "$waitstacks"
}

mkdir -p "$WORK/flight"
run_with default 1
run_with precise 0 STRATA_STARTUP_FEATURES=stackwalk,threads,cpu,waitstacks,precise
run_with timer 1 STRATA_SAMPLING_SOURCE=timer
run_with framepointers 1 STRATA_STARTUP_FEATURES=stackwalk,threads,cpu,waitstacks,framepointers
run_with no_waitstacks 0 STRATA_STARTUP_FEATURES=-waitstacks
run_with small_buffer 1 STRATA_STARTUP_BUFFER_MB=1
run_with flight 1 STRATA_FLIGHT_RECORDER="$WORK/flight"

name=record
env "${SANITIZER_ENV[@]}" timeout -s KILL 120 "$STRATA" record -o "$OUT/$name.json" -- \
  "$program" "${args[@]}" >"$WORK/$name.out" 2>"$WORK/$name.err"
RUN_STATUS=$?
check_run "$name" 1

finish
