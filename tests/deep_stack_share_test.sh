#!/usr/bin/env bash
# Scenario: the stack walk's own cost is not charged to the code it samples (issue 34).
# tests/deep_recursion --rounds R --deep-percent P alternates, R times, the spin at the bottom of
# a 1 000-deep recursion (deep_recurse: P % of each round's work) and the same spin 2 frames
# from main (shallow_entry: the rest). The program measures each side's CPU itself (its thread
# CPU clock around every call); the plain run's split is the truth (in a profiled run the deep
# side's clock also holds Strata's walks). Two mixes: 50/50 in 40 rounds, and 5/95 in 20 rounds
# (the issue's case: a deep function with a few % of the CPU, 9.2 % of Strata's samples for
# 3.9 % in perf). Before the compensation (sample_capture.cc, "The handler's own cost") a deep
# walk ate the next sampling period, so the deep side drew extra samples: 60.3 % of them for
# 50.0 % of the CPU, 7.8-8.0 % for 5.05 %, with libunwind walking every frame. The libunwind runs
# use the program built without frame pointers (deep_recursion_nofp: every frame a libunwind
# step, ~0.4 us each, not the verified frame-pointer steps of issue 38), the frame-pointer runs
# the program built with them; each against its own plain run. Per preloaded run:
#   - same status and first output line as plain;
#   - the share of the main thread's samples taken while it ran (CPU delta > 0: not the copies
#     a preempted thread gets, which follow wall time) in the recursion, among those on either
#     side, is the plain run's deep CPU share within 1 point for the 5/95 mix with frame
#     pointers (the issue's goal), 1.5 with libunwind on every frame, 4 for 50/50 (below;
#     a ratio inside the run: no speed assumed);
#   - at least 100 such samples on the two sides (something was measured).
# Under TSan the walk is many times slower and the share check is skipped.
source "$(dirname "$0")/scenario_lib.sh"


# plain_run PROGRAM ARGS...: sets plain_status and expected (the deep side's CPU share, percent).
plain_run() {
  "$@" >"$WORK/plain.out" 2>"$WORK/plain.err"
  plain_status=$?
  [[ $plain_status -eq 0 ]] && pass "plain run of $(basename "$1") ${*:2}: status 0" ||
    fail "plain run of $(basename "$1"): status $plain_status"
  cat "$WORK/plain.out"
  expected=$(awk -F'[ =]' '/^deep_cpu_ns=/ { printf "%.2f", 100 * $2 / ($2 + $4) }' "$WORK/plain.out")
  [[ -n "$expected" ]] && pass "plain run: deep side's CPU share $expected %" ||
    fail "plain run: no CPU split printed"
}

check_run() {
  local name="$1"
  show_run "$name"
  [[ "$RUN_STATUS" -eq "$plain_status" ]] &&
    pass "$name: status $RUN_STATUS, as plain" ||
    fail "$name: status $RUN_STATUS, plain $plain_status"
  cmp -s <(head -1 "$WORK/plain.out") <(head -1 "$WORK/$name.out") &&
    pass "$name: output as plain" || fail "$name: output differs from the plain run"
  require_profile "$name" || return
  stats "$name" "GeckoMain:deep_recurse" "GeckoMain:shallow_entry" || return
  check_format "$name"
  # The profile says what it left out: the long handlers' CPU, and that kernel CPU is not
  # sampled where it happens.
  local excluded
  excluded=$(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
log = p.get("profilingLog", {})
entry = next((v for v in log.values() if isinstance(v, dict) and "kernelCpu" in v), {})
print(entry.get("longHandlerCpuMs", ""), "kernel" if entry.get("kernelCpu") else "")
' "$OUT/$name.json" 2>/dev/null)
  [[ "$excluded" == *kernel ]] && pass "$name: profilingLog says kernel CPU is not sampled where it happens" ||
    fail "$name: no kernelCpu in profilingLog"
  ge "${excluded%% *}" 0 && pass "$name: profilingLog.longHandlerCpuMs = ${excluded%% *}" ||
    fail "$name: no longHandlerCpuMs in profilingLog ($excluded)"
  if [[ "$name" == share*_libunwind ]] && ! skip_under_tsan "$name: long handlers measured"; then
    # ~0.4 ms walks of 1 000 frames, hundreds of them: far more than 10 ms.
    ge "${excluded%% *}" 10 && pass "$name: the deep walks' CPU (${excluded%% *} ms) measured and reported" ||
      fail "$name: only ${excluded%% *} ms of long-handler CPU reported (want >= 10 with 1 000-frame libunwind walks)"
  fi
  if skip_under_tsan "$name: deep side's share"; then return; fi
  local deep shallow share
  deep=$(field "$name" match "patterns=deep_recurse" real_count)
  shallow=$(field "$name" match "patterns=shallow_entry" real_count)
  share=$(awk -v d="${deep:-0}" -v s="${shallow:-0}" 'BEGIN { if (d + s > 0) printf "%.2f", 100 * d / (d + s) }')
  result "scenario=deep_stack_share run=$name deep_samples=$deep shallow_samples=$shallow" \
    "deep_share_pct=$share plain_cpu_share_pct=$expected"
  ((${deep:-0} + ${shallow:-0} >= 100)) &&
    pass "$name: $deep + $shallow samples on the two sides" ||
    fail "$name: only ${deep:-0} + ${shallow:-0} samples on the two sides (want >= 100)"
  [[ -n "$share" && -n "$expected" ]] &&
    awk -v a="$share" -v b="$expected" -v t="$tolerance_points" \
      'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }' &&
    pass "$name: deep side $share % of the samples, its CPU share $expected % (within $tolerance_points points)" ||
    fail "$name: deep side ${share:-?} % of the samples, its CPU share ${expected:-?} % (want within $tolerance_points points)"
}

# Deep side's %, rounds, iterations, tolerances (points) for the libunwind and the frame-pointer
# runs. With libunwind on every frame (walks of 0.4-0.8 ms, over half the period in
# -c fastbuild) the credit leaves the deep side a bias (docs/sampling.md, "The handler's own
# cost": what is left): 52.3-53.1 % at 50/50, 5.5-6.1 % for 5.0 % at 5/95 under load 20-36
# (7.2-7.9 % without the compensation); hence 4 and 1.5 points there, 1 point (the issue's
# goal) for the frame-pointer walk's 5/95.
for mix in "50 40 1200000000 4 4" "5 20 1500000000 1.5 1"; do
  read -r percent rounds iterations libunwind_tolerance framepointers_tolerance <<<"$mix"
  args=(--depth 1000 --iterations "$iterations" --rounds "$rounds" --deep-percent "$percent")
  program="$(binary tests/deep_recursion_nofp)"
  plain_run "$program" "${args[@]}"
  run_profiled "share${percent}_libunwind" "$program" "${args[@]}"
  tolerance_points=$libunwind_tolerance check_run "share${percent}_libunwind"
  program="$(binary tests/deep_recursion)"
  plain_run "$program" "${args[@]}"
  STRATA_STARTUP_FEATURES=framepointers run_profiled "share${percent}_framepointers" "$program" "${args[@]}"
  tolerance_points=$framepointers_tolerance check_run "share${percent}_framepointers"
done

finish
