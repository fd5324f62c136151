#!/usr/bin/env bash
# Scenario: the profile's CPU deltas tell the truth (issue 17, "CPU accounting"), quiet and,
# as cpu_accounting_loaded_test, with 2 busy processes per CPU beside it.
#
# tests/cpu_accounting runs a busy thread, a bursty one (2 ms of CPU, 3 ms asleep), one that
# uses less than an interval of CPU at a time, and one that pauses the session for 100 ms of
# its CPU. Each prints its own CPU clock at its end. In each sampling mode, for every one:
# - the sum of its samples' CPU deltas (the first sample's included: it carries the CPU used
#   since sampling started) is within 5 % of its CPU clock, less what it used while paused
#   (short by up to one more interval: the CPU after a thread's last sample);
# - no sample's CPU delta exceeds the wall time since the thread's previous sample by more than
#   one scheduler tick (4 ms at HZ=250) and an interval: no CPU is carried by a later sample (before issue 17 a
#   preempted thread got zero-CPU copies and its next sample all the CPU: 17.6 ms in 0.11 ms).
source "$(dirname "$0")/scenario_lib.sh"

program="$(binary tests/cpu_accounting)"
readonly kTolerancePct=5
readonly kTickMs=4
# The excess allowed: a tick and an interval (1 ms). CI's run of 2026-12-07 (load ~5) failed
# the timer mode's bursty thread at 4.33 ms with a tick alone. On this VM the thread CPU
# clock itself runs ahead of CLOCK_MONOTONIC over short spans (timing each pwrite with both
# clocks under load: 73 us of CPU in 32 us of wall time, among others), so a tick-bound
# source's sample can carry a little more than a tick; the defect this guards against (issue
# 17: 17.6 ms carried in 0.11 ms) is far above either bound.
readonly kExcessMs=$((kTickMs + 1))

# default: perf task-clock events where the kernel allows them; timer: CPU-clock timers (the
# fallback, tick-bound); precise: wall-clock timers.
for mode in default timer precise; do
  name="accounting_$mode"
  features=stackwalk,threads,cpu
  source=auto
  [[ $mode == precise ]] && features=stackwalk,threads,cpu,precise
  [[ $mode == timer ]] && source=timer
  STRATA_SAMPLING_SOURCE=$source STRATA_STARTUP_FEATURES=$features run_profiled "$name" "$program"
  show_run "$name"
  if [[ $RUN_STATUS -ne 0 || ! -s "$OUT/$name.json" ]]; then
    fail "$name: the program failed (status $RUN_STATUS) or wrote no profile"
    continue
  fi
  check_format "$name"
  stats "$name" || continue
  while read -r thread_name tid cpu_ms paused_ms; do
    expected=$(awk -v c="$cpu_ms" -v p="$paused_ms" 'BEGIN { printf "%.3f", c - p }')
    sampled=$(field "$name" thread "tid=$tid" cpu_all_ms)
    excess=$(field "$name" thread "tid=$tid" cpu_excess_max_ms)
    result "scenario=cpu_accounting mode=$mode thread=$thread_name cpu_ms=$cpu_ms paused_ms=$paused_ms expected_ms=$expected sampled_ms=${sampled:-none} excess_max_ms=${excess:-none}"
    if [[ -z "$sampled" ]]; then
      fail "$name: thread $thread_name (tid $tid) is not in the profile"
      continue
    fi
    # The CPU a thread uses after its last sample, up to an interval (1 ms), is carried by no
    # sample (its end takes none): a shortfall of up to that on top of the 5 %. It is most of
    # the tolerance for the short thread (5 % of ~14 ms is 0.7 ms): seen 14.918 of 15.837 ms
    # (precise mode, load ~7), 13.158 of 14.475 ms (under TSan, whose handler runs at the
    # thread's next intercepted call, CPU-clock timers). An excess is never allowed more.
    slack_ms=1
    if awk -v s="$sampled" -v e="$expected" -v t="$kTolerancePct" -v k="$slack_ms" \
         'BEGIN { d = s - e; if (d < 0) d = -d; exit !(d <= e * t / 100 || (s < e && d <= e * t / 100 + k)) }'; then
      pass "$name: $thread_name: samples carry $sampled ms of CPU, its clock says $expected ms (within $kTolerancePct %)"
    else
      fail "$name: $thread_name: samples carry $sampled ms of CPU, its clock says $expected ms (more than $kTolerancePct % apart)"
    fi
    if ge "$kExcessMs" "$excess"; then
      pass "$name: $thread_name: no sample carries more CPU than the wall time since the previous one plus a tick and an interval (worst excess $excess ms)"
    else
      fail "$name: $thread_name: a sample carries $excess ms more CPU than the wall time since the thread's previous sample (> $kExcessMs ms)"
    fi
  done < <(sed -n 's/^thread name=\([^ ]*\) tid=\([0-9]*\) cpu_ms=\([0-9.]*\) paused_ms=\([0-9.]*\)$/\1 \2 \3 \4/p' "$WORK/$name.out")
  threads_reported=$(grep -c '^thread name=' "$WORK/$name.out")
  [[ $threads_reported -eq 4 ]] || fail "$name: the program reported $threads_reported threads, not 4"
  check_frontend "$name"
done

finish
