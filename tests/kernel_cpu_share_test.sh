#!/usr/bin/env bash
# Scenario: kernel CPU is charged to the system call's caller (issue 34).
# tests/kernel_cpu_share alternates bursts of pwrite(2) to a tmpfs file (CPU spent in the
# kernel, copying pages) with bursts of arithmetic, and measures each side's CPU itself. The
# perf task-clock event signals user mode only, so before issue 34's charging pwrite got
# almost no samples (its CPU went to the next user-mode sample, in WriteBurst's loop or
# ComputeBurst), and the thread ~1/3 fewer samples than its CPU clock called for. Now each
# wrapped call's CPU becomes samples on its own stack (base/internal/wait/kernel_cpu_charge.h).
# Per run, ratios inside the run (no speed assumed):
#   - among the main thread's CPU samples (CPU delta > 0: wall-clock wait samples of a
#     preempted call are not CPU) in WriteBurst or ComputeBurst, the share whose stack has
#     pwrite against the share of the bursts' CPU the program measured inside its pwrite
#     calls (pwrite_cpu_ns: a clock read each side of each call): at most 5 points above it,
#     and at least 3/4 of it (quiet, load ~1: 24.5-26.7 % against 27.4-28.2 %, 0.90-0.95 of
#     it, 2026-12-07); on a loaded machine
#     the profile's share falls to ~85 % of the program's (load 16-23: 25.6-29.7 % against
#     30.8-31.5 %): Strata's own work in the wrapper grows with load (the walks of waits it
#     writes itself, its clock reads), and a sample in it shows the caller (WriteBurst) as
#     its leaf (Strata's frames are dropped); a call found switched out is not charged
#     (docs/sampling.md, "Kernel CPU charged to the call"). Before issue 34's charging,
#     pwrite had almost no samples: below 3/4 of its share, this check's failure;
#   - the main thread's samples one interval of its CPU apart (the median CPU delta in each
#     quarter of its CPU, 0.8-1.25 x interval: scenario_lib.sh one_interval_apart) and at
#     most one CPU sample per interval of the bursts' CPU (+5 %); how many per interval is
#     printed (a loaded kernel leaves some user-mode overflows out: issue 35);
#   - the samples' CPU deltas sum to the thread's CPU clock (the bursts' CPU within -1 % - 2 ms
#     and +5 % + 20 ms: the program's start and end are outside the bursts);
#   - profilingLog.kernelCpu says wrapped calls' kernel CPU is charged to them.
# With libunwind (the program built without frame pointers) and with frame pointers.
# Then blocking reads (`--blocking-reads 300`: 1-byte reads of a pipe another thread fills
# every 5 ms, each switched out, almost no CPU): the main thread's CPU in the profile is at
# most its CPU clock (+5 % + 2 ms). Before 2026-12-07 a switched call was charged "the CPU
# since its latest sched-in" from the perf page, whose time drifts from the thread's clock by
# ~20 us per switch: a thread of 34 ms of CPU got 1 128 CPU samples on `read` (its blocked
# time charged as CPU).
source "$(dirname "$0")/scenario_lib.sh"

args=(--rounds 60 --write-ms 4 --compute-ms 8)
tolerance_points=5
lowest_fraction=0.75

check_run() {
  local name="$1"
  show_run "$name"
  [[ "$RUN_STATUS" -eq 0 ]] && pass "$name: status 0" || fail "$name: status $RUN_STATUS"
  require_profile "$name" || return
  stats "$name" "GeckoMain:pwrite" "GeckoMain:WriteBurst" "GeckoMain:ComputeBurst" || return
  check_format "$name"
  local write_ns compute_ns pwrite_ns
  write_ns=$(sed -n 's/^write_cpu_ns=\([0-9]*\).*/\1/p' "$WORK/$name.out")
  compute_ns=$(sed -n 's/.*compute_cpu_ns=\([0-9]*\).*/\1/p' "$WORK/$name.out")
  pwrite_ns=$(sed -n 's/.*pwrite_cpu_ns=\([0-9]*\).*/\1/p' "$WORK/$name.out")
  if [[ -z "$write_ns" || -z "$compute_ns" || -z "$pwrite_ns" ]]; then
    fail "$name: the program printed no CPU split"
    return
  fi
  local kernel_cpu
  kernel_cpu=$(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
log = p.get("profilingLog", {})
entry = next((v for v in log.values() if isinstance(v, dict) and "kernelCpu" in v), {})
print(entry.get("kernelCpu", ""))
' "$OUT/$name.json" 2>/dev/null)
  [[ "$kernel_cpu" == *"charged to the wrapped call"* ]] &&
    pass "$name: profilingLog.kernelCpu: $kernel_cpu" ||
    fail "$name: profilingLog.kernelCpu does not say wrapped calls are charged: '$kernel_cpu'"
  if skip_under_tsan "$name: shares and rates"; then return; fi
  local pwrite write compute expected share
  pwrite=$(field "$name" match "patterns=pwrite" real_count)
  write=$(field "$name" match "patterns=WriteBurst" real_count)
  compute=$(field "$name" match "patterns=ComputeBurst" real_count)
  expected=$(awk -v p="$pwrite_ns" -v w="$write_ns" -v c="$compute_ns" \
    'BEGIN { printf "%.2f", 100 * p / (w + c) }')
  share=$(awk -v p="${pwrite:-0}" -v w="${write:-0}" -v c="${compute:-0}" \
    'BEGIN { if (w + c > 0) printf "%.2f", 100 * p / (w + c) }')
  result "scenario=kernel_cpu_share run=$name pwrite_samples=$pwrite write_samples=$write" \
    "compute_samples=$compute pwrite_share_pct=$share pwrite_cpu_share_pct=$expected"
  ((${write:-0} + ${compute:-0} >= 200)) &&
    pass "$name: $write + $compute CPU samples in the bursts" ||
    fail "$name: only ${write:-0} + ${compute:-0} CPU samples in the bursts (want >= 200)"
  [[ -n "$share" ]] &&
    awk -v a="$share" -v b="$expected" -v t="$tolerance_points" -v f="$lowest_fraction" \
      'BEGIN { exit !(a <= b + t && a >= f * b) }' &&
    pass "$name: pwrite in $share % of the CPU samples, its CPU share $expected % (at most $tolerance_points points above, at least $lowest_fraction of it)" ||
    fail "$name: pwrite in ${share:-?} % of the CPU samples, its CPU share $expected % (want at most $tolerance_points points above, at least $lowest_fraction of it)"
  # One CPU sample per interval of the bursts' CPU, in what load cannot move: the main
  # thread's samples (the charged ones each stand for one interval of the calls' CPU) one
  # interval of its CPU apart in every quarter of it, and no more samples than intervals
  # (charged samples on top of user-mode overflows for the same CPU would be more). The count
  # per interval is printed: 74 % before issue 34's charging (that defect also fails the
  # share above), ~98 % quiet; a loaded kernel leaves some overflows out (issue 35).
  local interval rate
  interval=$(field "$name" profile "" interval)
  rate=$(awk -v n="$((${write:-0} + ${compute:-0}))" -v w="$write_ns" -v c="$compute_ns" -v i="${interval:-1}" \
    'BEGIN { printf "%.1f", 100 * n * i * 1e6 / (w + c) }')
  result "scenario=kernel_cpu_share run=$name samples_per_interval_pct=$rate" \
    "cpu_delta_quarter_medians_ms=$(field "$name" thread name=GeckoMain cpu_delta_quarter_medians_ms)"
  one_interval_apart "$name" name=GeckoMain "${interval:-0}" &&
    pass "$name: the main thread's samples are one interval of its CPU apart all along (quarter medians $QUARTER_MEDIANS ms)" ||
    fail "$name: the main thread's median CPU delta per quarter of its CPU is ${QUARTER_MEDIANS:-none} ms, expected the interval (${interval:-?} ms; 0.8-1.25x)"
  ge 105 "$rate" && pass "$name: $rate % of one CPU sample per interval of the bursts' CPU (at most one per interval, +5 %)" ||
    fail "$name: $rate % of one CPU sample per interval of the bursts' CPU: more than one per interval"
  local cpu_all
  cpu_all=$(field "$name" thread "name=GeckoMain" cpu_all_ms)
  awk -v a="${cpu_all:-0}" -v w="$write_ns" -v c="$compute_ns" \
    'BEGIN { b = (w + c) / 1e6; exit !(a >= 0.99 * b - 2 && a <= 1.05 * b + 20) }' &&
    pass "$name: the samples carry $cpu_all ms of CPU, the bursts $(((write_ns + compute_ns) / 1000000)) ms" ||
    fail "$name: the samples carry ${cpu_all:-?} ms of CPU, the bursts $(((write_ns + compute_ns) / 1000000)) ms (want within -1 % - 2 ms and +5 % + 20 ms)"
}

run_profiled charged_libunwind "$(binary tests/kernel_cpu_share_nofp)" "${args[@]}"
check_run charged_libunwind
STRATA_STARTUP_FEATURES=framepointers run_profiled charged_framepointers \
  "$(binary tests/kernel_cpu_share)" "${args[@]}"
check_run charged_framepointers

run_profiled blocking_reads "$(binary tests/kernel_cpu_share)" --blocking-reads 300
show_run blocking_reads
[[ "$RUN_STATUS" -eq 0 ]] && pass "blocking_reads: status 0" || fail "blocking_reads: status $RUN_STATUS"
if require_profile blocking_reads && stats blocking_reads "GeckoMain:BlockingReads"; then
  main_cpu_ns=$(sed -n 's/.*main_cpu_ns=\([0-9]*\).*/\1/p' "$WORK/blocking_reads.out")
  profile_cpu=$(field blocking_reads thread "name=GeckoMain" cpu_all_ms)
  read_cpu_samples=$(field blocking_reads match "patterns=BlockingReads" real_count)
  result "scenario=kernel_cpu_share run=blocking_reads main_cpu_ms=$((${main_cpu_ns:-0} / 1000000))" \
    "profile_cpu_ms=$profile_cpu read_cpu_samples=$read_cpu_samples"
  awk -v a="${profile_cpu:-x}" -v c="${main_cpu_ns:-0}" \
    'BEGIN { if (a == "x") exit 1; exit !(a <= 1.05 * c / 1e6 + 2) }' &&
    pass "blocking_reads: the main thread's samples carry $profile_cpu ms of CPU, its clock $((${main_cpu_ns:-0} / 1000000)) ms (blocked time not charged as CPU)" ||
    fail "blocking_reads: the main thread's samples carry ${profile_cpu:-?} ms of CPU, its clock $((${main_cpu_ns:-0} / 1000000)) ms (want at most +5 % + 2 ms)"
fi

finish
