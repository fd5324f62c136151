#!/usr/bin/env bash
# The torture matrix's CI set (issue 33): every pair of values of any two dimensions of
# tests/torture/torture.py (allocator, process kinds, thread ends, signal set-ups, descriptor
# limit, stacks, seccomp, way of profiling) in at least one combination, each profiled run
# compared with the same combination run plain (status, output, files left, profile format).
# Longer runs: tools/torture.sh.
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
if python3 "$(dirname "$0")/torture.py" --mode pairwise \
    --program "$(binary tests/torture/torture_program)" --strata "$STRATA" \
    --library "$STRATA_PRELOAD" --check "$GECKO_CHECK" \
    --deny "$(binary tests/deny_perf_event_open)" --keep "$WORK/torture" >"$WORK/torture.log" 2>&1; then
  pass "$(tail -1 "$WORK/torture.log")"
else
  grep -A12 '^FAIL' "$WORK/torture.log" | head -150
  fail "$(tail -1 "$WORK/torture.log")"
fi
result "scenario=torture $(tail -1 "$WORK/torture.log" | sed 's/^torture: //')"
cp "$WORK/torture.log" "$OUT/" 2>/dev/null || true
finish
