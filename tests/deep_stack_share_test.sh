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
#     pointers (the issue's goal), 2.5 with libunwind on every frame, 4 for 50/50 (below;
#     a ratio inside the run: no speed assumed);
#   - such samples on the two sides: at least half as many as the program's own CPU on them
#     (its clocks, less the long handlers' CPU the profile reports) holds intervals;
#   - profilingLog.longHandlerCpuMs reported, and no more than the CPU the program's clocks
#     saw on the two sides; with libunwind on every frame, above 0 and at least half of the
#     extra CPU the program's deep side measured over the plain run's deep side scaled by the
#     two runs' shallow sides (the walks, as its own clock saw them: 83-95 % of it reported in
#     runs at load 8-46; unscaled, a CI run whose machine slowed by 1.58x between the two runs
#     failed with 22.6 ms reported for 69.6 ms, 20.4 ms once scaled).
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
  plain_deep_ms=$(awk -F'[ =]' '/^deep_cpu_ns=/ { printf "%.3f", $2 / 1e6 }' "$WORK/plain.out")
  plain_shallow_ms=$(awk -F'[ =]' '/^deep_cpu_ns=/ { printf "%.3f", $4 / 1e6 }' "$WORK/plain.out")
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
  # What the program's own clocks saw in this run: each side's CPU, ms.
  local long_ms run_deep_ms run_shallow_ms run_total_ms
  long_ms="${excluded%% *}"
  run_deep_ms=$(awk -F'[ =]' '/^deep_cpu_ns=/ { printf "%.3f", $2 / 1e6 }' "$WORK/$name.out")
  run_shallow_ms=$(awk -F'[ =]' '/^deep_cpu_ns=/ { printf "%.3f", $4 / 1e6 }' "$WORK/$name.out")
  run_total_ms=$(awk -F'[ =]' '/^deep_cpu_ns=/ { printf "%.3f", ($2 + $4) / 1e6 }' "$WORK/$name.out")
  if ge "$long_ms" 0 && [[ -n "$long_ms" && -n "$run_total_ms" ]] && ge "$run_total_ms" "$long_ms"; then
    pass "$name: profilingLog.longHandlerCpuMs = $long_ms, within the program's own $run_total_ms ms"
  else
    fail "$name: profilingLog.longHandlerCpuMs '${long_ms}' missing or over the program's own ${run_total_ms:-?} ms ($excluded)"
  fi
  if [[ "$name" == share*_libunwind ]] && ! skip_under_tsan "$name: long handlers measured"; then
    # Every 1 000-frame libunwind walk is a long handler; its CPU is on the deep side's clock.
    # The same code runs slower on a busier machine (CI saw the shallow side's clock at 1.58x
    # the plain run's), so the plain deep side is first scaled by this run's shallow side over
    # the plain one's: the rounds alternate the two sides, so both saw the same machine (the
    # shallow side's own short walks make the scale a little high: the extra a little low).
    local extra_ms
    extra_ms=$(awk -v a="$run_deep_ms" -v b="$plain_deep_ms" -v rs="$run_shallow_ms" -v ps="$plain_shallow_ms" \
      'BEGIN { d = a - b * (ps > 0 ? rs / ps : 1); printf "%.3f", (d > 0 ? d : 0) }')
    awk -v l="$long_ms" -v e="$extra_ms" 'BEGIN { exit !(l > 0 && l >= e / 2) }' &&
      pass "$name: the deep walks' CPU ($long_ms ms) measured and reported (the deep side's clock saw $extra_ms ms more than plain, scaled by the shallow sides)" ||
      fail "$name: $long_ms ms of long-handler CPU reported, the deep side's clock saw $extra_ms ms more than plain, scaled by the shallow sides (want above 0 and at least half)"
  fi
  if skip_under_tsan "$name: deep side's share"; then return; fi
  local deep shallow share
  deep=$(field "$name" match "patterns=deep_recurse" real_count)
  shallow=$(field "$name" match "patterns=shallow_entry" real_count)
  share=$(awk -v d="${deep:-0}" -v s="${shallow:-0}" 'BEGIN { if (d + s > 0) printf "%.2f", 100 * d / (d + s) }')
  result "scenario=deep_stack_share run=$name deep_samples=$deep shallow_samples=$shallow" \
    "deep_share_pct=$share plain_cpu_share_pct=$expected"
  # Samples are one per interval of the program's own CPU, the long handlers' CPU not counted.
  local interval_ms wanted
  interval_ms=$(field "$name" profile "" interval)
  wanted=$(awk -v t="${run_total_ms:-0}" -v l="${long_ms:-0}" -v i="${interval_ms:-0}" \
    'BEGIN { if (i > 0) printf "%d", (t - l) / i / 2; else print "" }')
  [[ -n "$wanted" ]] && ((wanted > 0 && ${deep:-0} + ${shallow:-0} >= wanted)) &&
    pass "$name: $deep + $shallow samples on the two sides (want >= $wanted: half of $run_total_ms ms less $long_ms ms at $interval_ms ms)" ||
    fail "$name: ${deep:-0} + ${shallow:-0} samples on the two sides (want >= ${wanted:-?}: half of ${run_total_ms:-?} ms less ${long_ms:-?} ms at ${interval_ms:-?} ms)"
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
# (7.2-7.9 % without the compensation). At 5/95 the share also has a sampling error: ~100 deep
# samples of ~1 900, one standard deviation 0.5 points, more under load (fewer samples); the
# +1.13 seen at load 36 plus 2.5 of them is 2.4 points: 2.5. That no longer tells the uncompensated
# +2.2-2.9 apart at 5/95; the 50/50 mix does (60.3 % without the compensation, 4 points
# allowed). 1 point (the issue's goal) for the frame-pointer walk's 5/95.
for mix in "50 40 1200000000 4 4" "5 20 1500000000 2.5 1"; do
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
