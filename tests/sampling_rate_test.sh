#!/usr/bin/env bash
# Scenario: the sampling rate is the interval, not the kernel tick (issue 17, "The sampling
# rate is the kernel tick"), and the profile says what sampled it (docs/sampling.md,
# "Sampling sources").
#
# tests/sampling_rate (no Strata include) runs a busy thread (1.5 s of its own CPU, measured
# by itself) and a thread that sleeps 200 ms in nanosleep, preloaded with STRATA_STARTUP=1:
# - default source (perf task-clock events where the kernel allows them): the busy thread's
#   samples come one interval of its own CPU apart all along (the median CPU delta between its
#   real samples in each quarter of its CPU, within 0.8-1.25 x meta.interval: a loaded kernel
#   leaves some overflows out, which only lengthens a few deltas), they carry the CPU its own clock counted (within 5 %: a
#   sampler or a source that stops falls short), and there are no more of them than intervals
#   of that CPU (+5 %). The real samples per CPU-second (and droppedSamples, samples the ring
#   had no room for while the sampler thread waited for a CPU) are printed, not asserted:
#   975-1 010 quiet and beside 4 CPU hogs, 857 in one fresh-clone CI run beside tools/load.sh
#   (issue 35). The sleep is not cut short; profilingLog.samplingSource names the perf
#   source; meta.interval is the requested 1 ms. Where the kernel refuses perf events the
#   profile must say so (and why) and the period checks are reported as not applicable.
# - STRATA_SAMPLING_SOURCE=timer: samplingSource says "CPU-clock timers" and why; meta.interval
#   tells the truth: the profile's CPU per real sample (all threads) is within 15 % of
#   meta.interval (the 4 ms tick or more here, not 1 ms); requestedInterval is 1.
# - perf_event_open refused by a seccomp filter (tests/deny_perf_event_open: EACCES, as at
#   perf_event_paranoid 3, and ENOSYS with STRATA_SAMPLING_SOURCE=perf; a filter that kills or
#   traps the call, tried first in a throwaway child: issue 33): the timers sample,
#   samplingSource gives the refusal, meta.interval tells the truth, the output is unchanged.
# - A bad STRATA_SAMPLING_SOURCE gets a clear error naming the accepted values.
# - --daemon: the main thread closes every descriptor above 2 (close_range(3, ~0U, 0)) halfway,
#   then opens and uses its own files: stdout and exit status byte-identical to the plain run
#   (Strata's descriptors are not on the numbers the daemon gets back), the sleep is not cut
#   short, and the busy thread is still sampled after the close: with perf events by a new
#   event at the interval (the median CPU delta of its real samples in BurnAfterClose within
#   0.8-1.25 x the interval; the timers' tick would be 4x) and its samples carry its CPU to
#   the end (within 5 %); with timers forced, at least one sample in BurnAfterClose.
# Every output and status is compared with the plain run. Quiet and with load beside it.
source "$(dirname "$0")/scenario_lib.sh"

program="$(binary tests/sampling_rate)"

meta_field() {  # NAME KEY: profilingLog.<pid>.KEY, or meta.KEY for "interval".
  python3 - "$OUT/$1.json" "$2" <<'EOF'
import json, sys
profile = json.load(open(sys.argv[1]))
key = sys.argv[2]
if key == "interval":
    print(profile["meta"]["interval"])
else:
    logs = list(profile.get("profilingLog", {}).values())
    print(logs[0].get(key, "") if logs else "")
EOF
}

busy_field() {  # NAME KEY: from the program's own sr-busy line on stderr.
  awk -v key="$2" '$1 == "sampling_rate:" && $2 == "thread=sr-busy" {
      for (i = 3; i <= NF; i++) if (index($i, key "=") == 1) { print substr($i, length(key) + 2); exit } }' "$WORK/$1.err"
}

check_sleeper() {
  local name="$1"
  if grep -q "^sampling_rate: thread=sr-sleeper .*status=ok" "$WORK/$name.err"; then
    pass "$name: nanosleep(200 ms) returned 0 after the full time"
  else
    fail "$name: the sleep was cut short: $(grep sr-sleeper "$WORK/$name.err")"
  fi
}

check_same_output() {
  local name="$1" plain="$2"
  if [[ $RUN_STATUS -eq 0 ]] && cmp -s "$WORK/$plain.out" "$WORK/$name.out"; then
    pass "$name: exit status 0 and stdout byte-identical to the plain run"
  else
    fail "$name: status $RUN_STATUS or stdout differs from the plain run:"
    diff "$WORK/$plain.out" "$WORK/$name.out" | sed 's/^/    /'
  fi
}

"$program" >"$WORK/plain.out" 2>"$WORK/plain.err"
plain_status=$?
"$program" --daemon >"$WORK/plain_daemon.out" 2>"$WORK/plain_daemon.err"
plain_daemon_status=$?
if [[ $plain_status -ne 0 || $plain_daemon_status -ne 0 ]]; then
  fail "the plain runs failed (status $plain_status, $plain_daemon_status)"
  finish
fi

# The CPU one sample stands for over the whole profile (every thread): the sum of every
# sample's CPU delta (first samples included: profile_stats' cpu_all_ms) over the number of
# samples that carried CPU (cpu_samples). meta.interval is that figure for the session; one
# thread's own can differ on a loaded machine (each thread meets the tick-bound timers' rate
# of its moment).
session_cpu_per_sample() {
  awk '$1 == "thread" {
      c = -1; n = 0
      for (k = 2; k <= NF; k++) {
        if ($k ~ /^cpu_all_ms=/) c = substr($k, 12) + 0
        if ($k ~ /^cpu_samples=/) n = substr($k, 13) + 0
      }
      if (c > 0 && n > 0) { cpu += c; count += n }
    }
    END { if (count > 0) printf "%.4f", cpu / count; else print 0 }' "$WORK/$1.stats"
}

# check_perf_period NAME INTERVAL: with perf events the busy thread's samples come one
# interval of its own CPU apart all along (one_interval_apart, scenario_lib.sh: the median CPU
# delta in each quarter of its CPU; the count per CPU-second falls under load, the median does
# not).
check_perf_period() {
  local name="$1" interval="$2"
  if one_interval_apart "$name" name=sr-busy "$interval"; then
    pass "$name: the busy thread's samples are one interval of its CPU apart all along (median CPU delta in each quarter of its CPU $QUARTER_MEDIANS ms, interval $interval ms)"
  else
    fail "$name: the busy thread's median CPU delta between samples in each quarter of its CPU is ${QUARTER_MEDIANS:-none} ms, expected the interval ($interval ms; 0.8-1.25x)"
  fi
}

# check_cpu_carried NAME CPU_MS: the busy thread's samples carry the CPU its own clock counted
# (every sample's CPU delta added up, the first one's included) within 5 %: a sampler that
# stops, a source that stops signalling (the rest of the thread's CPU carried by no sample)
# or samples lost without their CPU passed on all fall short. The CPU after the last sample (one
# interval, or one of the gaps above: 29 ms of 1 500) is within that.
check_cpu_carried() {
  local name="$1" cpu_ms="$2" carried
  carried="$(field "$name" thread name=sr-busy cpu_all_ms)"
  if awk -v s="${carried:-0}" -v c="${cpu_ms:-0}" 'BEGIN { d = s - c; if (d < 0) d = -d; exit !(c > 0 && d <= 0.05 * c) }'; then
    pass "$name: the busy thread's samples carry $carried ms of CPU, its own clock says $cpu_ms ms (within 5 %)"
  else
    fail "$name: the busy thread's samples carry ${carried:-none} ms of CPU, its own clock says ${cpu_ms:-none} ms (more than 5 % apart)"
  fi
}

# --- Default source.
name=rate_default
run_profiled "$name" "$program"
show_run "$name"
check_same_output "$name" plain
check_sleeper "$name"
if require_profile "$name" && stats "$name"; then
  source_text="$(meta_field "$name" samplingSource)"
  interval="$(meta_field "$name" interval)"
  cpu_ms="$(busy_field "$name" cpu_ms)"
  real="$(field "$name" thread name=sr-busy cpu_samples)"
  dropped="$(meta_field "$name" droppedSamples)"
  rate=$(awk -v n="${real:-0}" -v c="${cpu_ms:-0}" 'BEGIN { if (c > 0) printf "%.1f", n * 1000 / c; else print 0 }')
  # Samples the source delivered: the real ones plus those the thread's ring had no room for
  # (droppedSamples: the sampler thread waited for a CPU longer than the ring lasts; the ring's
  # size is not the source's doing). Both figures are printed.
  taken=$(awk -v n="${real:-0}" -v d="${dropped:-0}" -v c="${cpu_ms:-0}" 'BEGIN { if (c > 0) printf "%.1f", (n + d) * 1000 / c; else print 0 }')
  result "scenario=sampling_rate mode=default source=\"$source_text\" interval=$interval busy_cpu_ms=$cpu_ms real_samples=$real dropped=$dropped per_cpu_second=$rate with_dropped=$taken cpu_delta_quarter_medians_ms=$(field "$name" thread name=sr-busy cpu_delta_quarter_medians_ms) cpu_delta_max_ms=$(field "$name" thread name=sr-busy cpu_delta_max_ms)"
  if [[ "$source_text" == "perf task-clock events"* ]]; then
    pass "$name: samplingSource is '$source_text'"
    check_perf_period "$name" "$interval"
    check_cpu_carried "$name" "$cpu_ms"
    # The kernel can leave overflows out, never add any: more real samples than intervals of
    # the busy thread's own CPU is a second source or samples taken twice.
    if ge "$(awk -v i="${interval:-1}" 'BEGIN { printf "%.1f", 1050 / i }')" "$rate"; then
      pass "$name: $rate real samples per CPU-second of the busy thread, no more than one per interval (+5 %)"
    else
      fail "$name: $rate real samples per CPU-second of the busy thread: more than one per interval of its CPU ($interval ms)"
    fi
    if [[ "$interval" == "1" || "$interval" == "1.0" ]]; then
      pass "$name: meta.interval is the requested 1 ms"
    else
      fail "$name: meta.interval is $interval with perf events, expected 1"
    fi
  elif [[ "$source_text" == "CPU-clock timers: perf_event_open refused"* ]]; then
    pass "$name: perf events refused here; the profile says so: '$source_text' (rate check not applicable)"
  else
    fail "$name: samplingSource is '$source_text', expected the perf source or the reason for timers"
  fi
  check_frontend "$name"
fi

# --- Timers forced.
name=rate_timer
STRATA_SAMPLING_SOURCE=timer run_profiled "$name" "$program"
show_run "$name"
check_same_output "$name" plain
check_sleeper "$name"
if require_profile "$name" && stats "$name"; then
  source_text="$(meta_field "$name" samplingSource)"
  interval="$(meta_field "$name" interval)"
  requested="$(meta_field "$name" requestedInterval)"
  busy="$(field "$name" thread name=sr-busy cpu_interval_ms)"
  measured="$(session_cpu_per_sample "$name")"
  result "scenario=sampling_rate mode=timer source=\"$source_text\" interval=$interval requested=$requested cpu_per_real_sample_ms=$measured busy_cpu_per_real_sample_ms=$busy"
  if [[ "$source_text" == "CPU-clock timers: STRATA_SAMPLING_SOURCE=timer" ]]; then
    pass "$name: samplingSource is '$source_text'"
  else
    fail "$name: samplingSource is '$source_text', expected the timers and the reason"
  fi
  if awk -v m="${measured:-0}" -v i="${interval:-0}" 'BEGIN { exit !(i > 0 && m / i > 0.85 && m / i < 1.15) }'; then
    pass "$name: meta.interval $interval ms matches the profile's CPU per real sample ($measured ms; the busy thread's $busy ms)"
  else
    fail "$name: meta.interval $interval ms, but the profile's CPU per real sample is $measured ms (the busy thread's $busy ms)"
  fi
  if [[ "$requested" == "1" || "$requested" == "1.0" ]]; then
    pass "$name: requestedInterval is 1"
  else
    fail "$name: requestedInterval is '$requested', expected 1"
  fi
  check_frontend "$name"
fi

# --- perf_event_open refused (a seccomp filter, as a container's, or perf_event_paranoid=3):
# CPU-clock timers, and the profile says why. With STRATA_SAMPLING_SOURCE=perf the refusal is
# an error on stderr too.
deny="$(binary tests/deny_perf_event_open)"
# A filter that kills or traps perf_event_open (systemd's SystemCallFilter=, minijail): the
# call is tried in a throwaway child first, so the program is not killed (issue 33; status 159
# before).
for refusal in "13 auto EACCES" "38 perf ENOSYS" "kill auto the process's seccomp filter" \
               "trap auto the process's seccomp filter"; do
  read -r errno_number request errno_name <<<"$refusal"
  name=refused_${errno_name%% *}_$errno_number
  STRATA_SAMPLING_SOURCE=$request run_profiled "$name" "$deny" "$errno_number" "$program"
  show_run "$name"
  check_same_output "$name" plain
  check_sleeper "$name"
  if require_profile "$name" && stats "$name"; then
    source_text="$(meta_field "$name" samplingSource)"
    interval="$(meta_field "$name" interval)"
    busy="$(field "$name" thread name=sr-busy cpu_interval_ms)"
    measured="$(session_cpu_per_sample "$name")"
    result "scenario=sampling_rate mode=$name source=\"$source_text\" interval=$interval cpu_per_real_sample_ms=$measured busy_cpu_per_real_sample_ms=$busy"
    if [[ "$source_text" == "CPU-clock timers: perf_event_open refused ($errno_name"* ]]; then
      pass "$name: samplingSource is '$source_text'"
    else
      fail "$name: samplingSource is '$source_text', expected CPU-clock timers and the refusal"
    fi
    if awk -v m="${measured:-0}" -v i="${interval:-0}" 'BEGIN { exit !(i > 0 && m / i > 0.85 && m / i < 1.15) }'; then
      pass "$name: meta.interval $interval ms matches the profile's CPU per real sample ($measured ms; the busy thread's $busy ms)"
    else
      fail "$name: meta.interval $interval ms, but the profile's CPU per real sample is $measured ms (the busy thread's $busy ms)"
    fi
    if [[ $request == perf ]]; then
      if grep -q "STRATA_SAMPLING_SOURCE=perf: perf_event_open refused ($errno_name" "$WORK/$name.err"; then
        pass "$name: the refusal is reported on stderr"
      else
        fail "$name: STRATA_SAMPLING_SOURCE=perf was refused silently"
      fi
    fi
  fi
done

# --- A bad value: a clear error, the default used.
name=rate_bad_value
STRATA_SAMPLING_SOURCE=sometimes run_profiled "$name" "$program"
if [[ $RUN_STATUS -eq 0 ]] && grep -q "STRATA_SAMPLING_SOURCE='sometimes' is not valid: expected auto, perf or timer" "$WORK/$name.err"; then
  pass "$name: a bad STRATA_SAMPLING_SOURCE is reported with the accepted values"
else
  fail "$name: no clear error for STRATA_SAMPLING_SOURCE=sometimes (status $RUN_STATUS):"
  sed 's/^/    /' "$WORK/$name.err" | head -5
fi

# --- The daemon: close_range(3, ~0U, 0) halfway, then its own files.
for source_request in auto timer; do
  name=daemon_$source_request
  STRATA_SAMPLING_SOURCE=$source_request run_profiled "$name" "$program" --daemon
  show_run "$name"
  check_same_output "$name" plain_daemon
  check_sleeper "$name"
  if require_profile "$name" && stats "$name" "sr-busy:BurnAfterClose"; then
    source_text="$(meta_field "$name" samplingSource)"
    interval="$(meta_field "$name" interval)"
    after_ms="$(busy_field "$name" after_close_cpu_ms)"
    after_samples="$(field "$name" match thread=sr-busy real_count)"
    after_median="$(field "$name" match thread=sr-busy real_cpu_delta_median_ms)"
    result "scenario=sampling_rate mode=$name source=\"$source_text\" interval=$interval after_close_cpu_ms=$after_ms after_close_samples=$after_samples after_close_cpu_delta_median_ms=$after_median lost=$(meta_field "$name" lostSamplingEvents)"
    if [[ "$source_text" == "perf task-clock events"* ]]; then
      # The event the close freed is replaced by a new one at the same period: the samples
      # after the close come one interval of the thread's CPU apart (CPU-clock timers, the
      # fallback, one 4 ms tick at best: 4x), and they carry the thread's CPU to its end.
      if awk -v m="${after_median:-0}" -v i="${interval:-0}" -v n="${after_samples:-0}" \
           'BEGIN { exit !(n >= 2 && i > 0 && m >= 0.8 * i && m <= 1.25 * i) }'; then
        pass "$name: after the close the busy thread is sampled by a perf event again: $after_samples samples one interval of its CPU apart (median CPU delta $after_median ms)"
      else
        fail "$name: after the close: $after_samples samples, median CPU delta ${after_median:-none} ms, expected a perf event's interval ($interval ms)"
      fi
      check_perf_period "$name" "$interval"
      check_cpu_carried "$name" "$(busy_field "$name" cpu_ms)"
    else
      # CPU-clock timers hold no descriptor, so the close cannot touch them. Their rate is the
      # kernel's tick and, loaded, far less (1 signal per 62 ms of the thread's CPU beside 8
      # busy processes on 2 CPUs, once 1 per 375 ms: 2 samples in 750 ms), so "still sampled"
      # is a sample after the close; its count is printed.
      if [[ "${after_samples:-0}" -ge 1 ]]; then
        pass "$name: the busy thread is still sampled after the close ($after_samples samples for $after_ms ms of CPU; source '$source_text')"
      else
        fail "$name: no sample after the close for $after_ms ms of CPU (source '$source_text')"
      fi
    fi
  fi
done

finish
