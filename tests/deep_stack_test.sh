#!/usr/bin/env bash
# Scenario: deep native stacks keep their root (issue 17). tests/deep_recursion (no Strata
# includes) spends its CPU at the bottom of a 600-deep recursion: main -> deep_entry ->
# deep_recurse x 600 -> deep_leaf_spin, ~605 native frames with the C runtime's. Run plain,
# then preloaded (STRATA_STARTUP=1) with each native walker: libunwind (the default) and frame
# pointers (STRATA_STARTUP_FEATURES=framepointers). Checks, per preloaded run:
#   - same exit status (0) and output as the plain run;
#   - every sample in the recursion (a frame deep_recurse) also has deep_entry and main: the
#     walk reached the root (with the 128-frame cap of before, no such sample had them);
#     counted with profile_stats' OR queries: A and B = A + B - (A or B);
#   - at least 20 samples in the recursion (something was checked);
#   - the profile checker accepts it and the front-end's importer loads it, with deep_leaf_spin
#     among the main thread's functions.
# Under TSan (stale contexts, scenario_lib.sh) the stack-content checks are skipped.
source "$(dirname "$0")/scenario_lib.sh"

program="$(binary tests/deep_recursion)"
depth=600

"$program" --depth "$depth" >"$WORK/plain.out" 2>"$WORK/plain.err"
plain_status=$?
[[ $plain_status -eq 0 ]] && pass "plain run: status 0" || fail "plain run: status $plain_status"

check_run() {
  local name="$1"
  show_run "$name"
  [[ "$RUN_STATUS" -eq "$plain_status" ]] &&
    pass "$name: status $RUN_STATUS, as plain" ||
    fail "$name: status $RUN_STATUS, plain $plain_status"
  cmp -s "$WORK/plain.out" "$WORK/$name.out" &&
    pass "$name: output as plain" || fail "$name: output differs from the plain run"
  require_profile "$name" || return
  stats "$name" "GeckoMain:deep_recurse" "GeckoMain:deep_entry" "GeckoMain:deep_recurse|deep_entry" \
    "GeckoMain:main" "GeckoMain:deep_recurse|main" || return
  check_format "$name"
  if skip_under_tsan "$name: roots of deep stacks"; then
    check_frontend "$name"
    return
  fi
  check_frontend "$name" GeckoMain:deep_leaf_spin
  local in_recursion with_entry either with_main either_main
  in_recursion=$(field "$name" match "patterns=deep_recurse" count)
  with_entry=$(field "$name" match "patterns=deep_entry" count)
  either=$(field "$name" match "patterns=deep_recurse|deep_entry" count)
  with_main=$(field "$name" match "patterns=main" count)
  either_main=$(field "$name" match "patterns=deep_recurse|main" count)
  local both=$((in_recursion + with_entry - either))
  local both_main=$((in_recursion + with_main - either_main))
  result "scenario=deep_stack run=$name depth=$depth samples_in_recursion=$in_recursion" \
    "with_deep_entry=$both with_main=$both_main"
  ((in_recursion >= 20)) &&
    pass "$name: $in_recursion samples in the $depth-deep recursion" ||
    fail "$name: only ${in_recursion:-0} samples in the recursion (want >= 20)"
  ((both == in_recursion)) &&
    pass "$name: all $in_recursion samples in the recursion keep deep_entry" ||
    fail "$name: $((in_recursion - both)) of $in_recursion samples in the recursion lost their root (no deep_entry)"
  ((both_main == in_recursion)) &&
    pass "$name: all $in_recursion samples in the recursion keep main" ||
    fail "$name: $((in_recursion - both_main)) of $in_recursion samples in the recursion lost main"
}

run_profiled deep_libunwind "$program" --depth "$depth"
check_run deep_libunwind
STRATA_STARTUP_FEATURES=framepointers run_profiled deep_framepointers "$program" --depth "$depth"
check_run deep_framepointers

finish
