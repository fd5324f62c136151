#!/usr/bin/env bash
# Sampled allocations with little stack left (docs/memory.md, "Stack"): alloc_tiny_stack_program
# allocates 20000 blocks under a label on a PTHREAD_STACK_MIN thread with only 4608 bytes of it
# left (less than the recording's kRecordStackNeed; its ~5 KiB common path and ~8 KiB + libunwind
# cursor walk would overflow it), preloaded with nativeallocations at R = 256 bytes: status and
# output as plain, the profile valid, and the skipped records counted in it
# (nativeAllocationsSkippedLowStack > 0). Then with 15 KiB left (1 KiB above kRecordStackNeed,
# on a larger stack): no crash, and records kept with the label in their stacks.
source "$(dirname "$0")/../scenario_lib.sh"

if [[ "$SANITIZER" == *asan* || "$SANITIZER" == *tsan* ]]; then
  echo "skipped under $SANITIZER: its runtime's allocator comes before the hooks"
  finish
fi

program="$(binary tests/native_allocations/alloc_tiny_stack_program)"
ALLOC_LIB="$(dirname "$STRATA_LIB")/libstrata_alloc.so"
[[ -f "$ALLOC_LIB" ]] || { fail "missing $ALLOC_LIB"; finish; }

# meta_number NAME KEY: a number from the profile's meta.profilingLog.
meta_number() {
  grep -o "\"$2\":[0-9]*" "$OUT/$1.json" | head -1 | cut -d: -f2
}

# run NAME ARGS...: plain, then preloaded with nativeallocations (profile in $OUT/NAME.json).
run() {
  local name="$1"
  shift
  timeout -s KILL 120 "$program" "$@" >"$WORK/$name.plain.out" 2>"$WORK/$name.plain.err"
  local plain=$?
  timeout -s KILL 120 env LD_PRELOAD="$(preload_value "$STRATA_LIB" "$ALLOC_LIB")" STRATA_STARTUP=1 \
    STRATA_STARTUP_FEATURES=nativeallocations STRATA_ALLOC_INTERVAL=256 \
    STRATA_SHUTDOWN="$OUT/$name.json" "$program" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  local status=$?
  if [[ $status -ne $plain ]] || ! cmp -s "$WORK/$name.plain.out" "$WORK/$name.out"; then
    fail "$name: status $status (plain $plain), output '$(tr '\n' ' ' <"$WORK/$name.out")'" \
      "(plain '$(tr '\n' ' ' <"$WORK/$name.plain.out")')"
    sed 's/^/    /' "$WORK/$name.err" | head -10
    return 1
  fi
  pass "$name: status $status and output as plain ($(tr '\n' ' ' <"$WORK/$name.out"))"
  check_format "$name"
}

# labelled_records NAME: the "Native allocation" records whose stack holds the label "Tiny stack".
labelled_records() {
  python3 - "$OUT/$1.json" "$(dirname "$(binary tests/native_allocations/alloc_check.py)")" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[2])
from alloc_check import function_names
profile = json.load(open(sys.argv[1]))
count = 0
for thread in profile["threads"]:
    schema = thread["markers"]["schema"]
    names = None
    for row in thread["markers"]["data"]:
        data = row[schema["data"]]
        if not isinstance(data, dict) or data.get("type") != "Native allocation" or not data.get("stack"):
            continue
        if names is None:
            names = function_names(thread)
        samples = data["stack"]["samples"]
        s = samples["data"][0][samples["schema"]["stack"]]
        stacks = thread["stackTable"]
        while s is not None:
            if names[stacks["data"][s][stacks["schema"]["frame"]]] == "Tiny stack":
                count += 1
                break
            s = stacks["data"][s][stacks["schema"]["prefix"]]
print(count)
PY
}

if run tiny_stack; then
  skipped=$(meta_number tiny_stack nativeAllocationsSkippedLowStack)
  if [[ "${skipped:-0}" -gt 0 ]]; then
    pass "tiny_stack: $skipped sampled allocations and frees skipped for want of stack (in the profile)"
  else
    fail "tiny_stack: nativeAllocationsSkippedLowStack=${skipped:-missing}"
  fi
fi

if run enough_stack 15360; then
  skipped=$(meta_number enough_stack nativeAllocationsSkippedLowStack)
  labelled=$(labelled_records enough_stack)
  if [[ -n "$skipped" && "${labelled:-0}" -gt 0 ]]; then
    pass "enough_stack (15 KiB left): $labelled records under the label ($skipped skipped)"
  else
    fail "enough_stack (15 KiB left): nativeAllocationsSkippedLowStack=${skipped:-missing}, ${labelled:-no} records under the label"
  fi
fi

finish
