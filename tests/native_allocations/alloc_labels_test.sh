#!/usr/bin/env bash
# Labels in allocation stacks (issue 37; docs/memory.md, "Labels"): alloc_labels_program (-O2
# -g, linked with the base tier; two threads) allocates inside labels pushed one and two
# frames up, in its own frame, in a recursion (the label at one of several frames with the
# same return address), under a dynamic label, and under a label whose function inlines the
# caller of the allocating function. alloc_labels_check.py checks every allocation and free
# record's stack: the allocating function under its label, each label right after the
# function that pushed it, no label where none was pushed.
#   - the preload recipe (names from ELF symbols at capture, no inline frames);
#   - `strata record` (DWARF at the end: inline frames, the label placed by its push site
#     above the inlined function: OuterHolder;Outer label;InlinedHelper;AllocateLeaf).
# Both profiles pass the format checker. With the libraries before labels were merged into
# allocation stacks, no record had a label: 22 914 of 25 856 records misplaced.
# The cursor walk (the fallback) forced for every record with labels, preloaded: the same
# checks, and the profile counts the walks (nativeAllocationCursorWalks > 0).
source "$(dirname "$0")/../scenario_lib.sh"

if [[ "$SANITIZER" == *asan* || "$SANITIZER" == *tsan* ]]; then
  echo "skipped under $SANITIZER: its runtime's allocator comes before the hooks"
  finish
fi

program="$(binary tests/native_allocations/alloc_labels_program)"
check="$(binary tests/native_allocations/alloc_labels_check.py)"
STRATA="$(binary tools/strata/strata)"
ALLOC_LIB="$(dirname "$STRATA_LIB")/libstrata_alloc.so"
[[ -f "$ALLOC_LIB" ]] || { fail "missing $ALLOC_LIB"; finish; }
# A small R: a few thousand records per case in well under a second of the program.
export STRATA_ALLOC_INTERVAL=4K
rounds=2000

# check_labels NAME [--inline]
check_labels() {
  local name="$1"
  shift
  check_format "$name"
  python3 "$check" "$OUT/$name.json" "$@" >"$WORK/$name.labels" 2>&1
  local status=$?
  sed 's/^/    /' "$WORK/$name.labels"
  result "scenario=alloc-labels-$name $(tail -1 "$WORK/$name.labels" | sed 's/^alloc_labels: //')"
  if [[ $status -eq 0 ]]; then
    pass "$name: every allocating function under its labels, each label after its function"
  else
    fail "$name: labels missing or misplaced in allocation stacks (above)"
  fi
}

timeout -s KILL 300 env LD_PRELOAD="$(preload_value "$STRATA_LIB" "$ALLOC_LIB")" STRATA_STARTUP=1 \
  STRATA_STARTUP_FEATURES=nativeallocations STRATA_SHUTDOWN="$OUT/preloaded.json" \
  "$program" "$rounds" >"$WORK/preloaded.out" 2>"$WORK/preloaded.err"
status=$?
if [[ $status -ne 0 ]]; then
  fail "preloaded: status $status ($(head -c 300 "$WORK/preloaded.err"))"
else
  check_labels preloaded
fi

# The cursor walk (the fallback where the searches cannot place a label) forced for every
# record with labels (STRATA_TEST_ALLOC_CURSOR_WALK=1): the same placement, and the profile
# counts the walks (nativeAllocationCursorWalks > 0).
timeout -s KILL 300 env LD_PRELOAD="$(preload_value "$STRATA_LIB" "$ALLOC_LIB")" STRATA_STARTUP=1 \
  STRATA_STARTUP_FEATURES=nativeallocations STRATA_SHUTDOWN="$OUT/cursor_walk.json" \
  STRATA_TEST_ALLOC_CURSOR_WALK=1 "$program" "$rounds" >"$WORK/cursor_walk.out" 2>"$WORK/cursor_walk.err"
status=$?
if [[ $status -ne 0 ]]; then
  fail "cursor_walk: status $status ($(head -c 300 "$WORK/cursor_walk.err"))"
else
  walks=$(grep -o '"nativeAllocationCursorWalks":[0-9]*' "$OUT/cursor_walk.json" | head -1 | cut -d: -f2)
  if [[ "${walks:-0}" -gt 0 ]]; then
    pass "cursor_walk: $walks records' labels placed by the cursor walk"
  else
    fail "cursor_walk: nativeAllocationCursorWalks=${walks:-missing}"
  fi
  check_labels cursor_walk
fi

timeout -s KILL 300 "$STRATA" record -q -o "$OUT/recorded.json" --features nativeallocations -- \
  "$program" "$rounds" >"$WORK/recorded.out" 2>"$WORK/recorded.err"
status=$?
if [[ $status -ne 0 ]]; then
  fail "strata record: status $status ($(head -c 300 "$WORK/recorded.err"))"
else
  check_labels recorded --inline
fi

finish
