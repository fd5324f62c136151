#!/usr/bin/env bash
# Scenario: precise mode (STRATA_STARTUP_FEATURES=precise, wall-clock timers) samples each busy
# worker at the requested interval, within 25 % (issue 3, Acceptance), for 1 ms and 2 ms.
#
# "Real" samples are those taken while the thread ran (CPU delta > 0), not the "same as
# before" copies the sampler records for a thread that did not run. A preempted thread
# cannot be interrupted, so the interval can only be measured while the workers have a CPU:
#   - when both workers were on a CPU >= 90 % of their lives: the effective interval,
#     (last - first real sample time) / (real samples - 1), must be within 25 %;
#   - otherwise (the machine is busy with other work; up to 3 runs are tried to get a quiet
#     one, and the quietest is used): the median time between consecutive real samples must be within 25 %; when even
#     that fails while the workers had less than half a CPU, the result is reported as
#     inconclusive, not as a failure.
# Also: meta.interval is the requested one, each worker's samples hold its own functions, the
# main thread (blocked in pthread_join) is parked rather than woken every interval, and the
# profile passes the format checker. Each worker spins ~0.65 s of CPU per run.
# Under TSan (scenario_lib.sh, UNDER_TSAN) one run per interval; the own-function and interval
# checks are skipped with a printed reason, the format, meta.interval and thread checks kept.
source "$(dirname "$0")/scenario_lib.sh"

program="$(binary tests/two_workers_fp)"

for interval in 1 2; do
  lo=$(awk -v i="$interval" 'BEGIN { print i * 0.75 }')
  hi=$(awk -v i="$interval" 'BEGIN { print i * 1.25 }')
  best_name="" best_share=-1
  for attempt in 1 2 3; do
    name="precise_${interval}ms_$attempt"
    STRATA_STARTUP_FEATURES=precise STRATA_STARTUP_INTERVAL=$interval \
      run_profiled "$name" "$program" --iterations 12000000
    show_run "$name"
    require_profile "$name" || continue 2
    stats "$name" "worker-alpha:spin_alpha_leaf|alpha_work_loop" \
      "worker-beta:spin_beta_leaf|beta_work_loop" >/dev/null || continue 2
    shares="$(worker_share "$name" worker-alpha) $(worker_share "$name" worker-beta)"
    echo "--- $name: CPU share of the workers: $shares"
    # shellcheck disable=SC2086
    share=$(min $shares)
    if ge "$share" "$best_share" && ! ge "$best_share" "$share"; then
      best_name=$name best_share=$share best_attempt=$attempt
    fi
    if ge "$share" 0.9 || ((UNDER_TSAN)); then break; fi
  done
  name=$best_name attempt=$best_attempt
  sed 's/^/    /' "$WORK/$name.stats" | grep -v '^    lib '
  check_format "$name"
  meta_interval=$(field "$name" profile "" interval)
  ge "$meta_interval" "$interval" && ge "$interval" "$meta_interval" &&
    pass "$name: meta.interval is $meta_interval" ||
    fail "$name: meta.interval is $meta_interval, requested $interval"

  # The main thread is blocked in pthread_join for the whole run: its timer is parked after
  # the first loop (thread_sampling.cc, DrainLocked), so it is shown by copies of its sample, not woken
  # at every interval (before parking: every one of its samples was a wake-up).
  if ! skip_under_tsan "$name: the blocked main thread's parked timer"; then
    main_samples=$(field "$name" thread "name=GeckoMain" samples)
    main_real=$(field "$name" thread "name=GeckoMain" cpu_samples)
    result "scenario=precise requested_ms=$interval thread=GeckoMain samples=$main_samples real_samples=$main_real"
    if ge "${main_samples:-0}" 100 && ge "$(awk -v s="${main_samples:-0}" 'BEGIN { print s / 10 }')" "${main_real:-0}"; then
      pass "$name: blocked main thread: $main_real of its $main_samples samples woke it (timer parked)"
    else
      fail "$name: blocked main thread: ${main_real:-?} of its ${main_samples:-?} samples woke it (want at least 100 samples, at most a tenth real)"
    fi
  fi

  for w in alpha beta; do
    thread="worker-$w"
    if skip_under_tsan "$name: $thread's own functions and its sampling interval"; then
      require_thread_listed "$name" "$thread"
      continue
    fi
    require_thread "$name" "$thread"
    real=$(field "$name" thread "name=$thread" cpu_samples)
    real_mean=$(field "$name" thread "name=$thread" real_mean_interval_ms)
    real_median=$(field "$name" thread "name=$thread" real_median_interval_ms)
    own_pct=$(field "$name" match "patterns=spin_${w}_leaf|${w}_work_loop" pct)
    cpu_share=$(worker_share "$name" "$thread")
    result "scenario=precise requested_ms=$interval thread=$thread attempt=$attempt" \
      "samples=$(field "$name" thread "name=$thread" samples) real_samples=$real" \
      "worker_cpu_ms=$(worker_cpu_ms "$name" "$thread") span_ms=$(field "$name" thread "name=$thread" span_ms)" \
      "cpu_share=$cpu_share effective_interval_ms=$real_mean median_interval_ms=$real_median" \
      "own_function_pct=$own_pct"
    ge "${own_pct:-0}" 80 && pass "$name: $own_pct % of $thread's samples in its own functions" ||
      fail "$name: only ${own_pct:-0} % of $thread's samples contain its own functions"
    if ge "$cpu_share" 0.9; then
      if [[ -n "$real_mean" ]] && ge "$real_mean" "$lo" && ge "$hi" "$real_mean"; then
        pass "$name: $thread: effective interval $real_mean ms, within 25 % of $interval ms"
      else
        fail "$name: $thread: effective interval ${real_mean:-?} ms is not within 25 % of $interval ms ($lo..$hi)"
      fi
    elif [[ -n "$real_median" ]] && ge "$real_median" "$lo" && ge "$hi" "$real_median"; then
      pass "$name: $thread (on a CPU $cpu_share of its life): median interval $real_median ms, within 25 % of $interval ms"
    elif ge "$cpu_share" 0.5; then
      fail "$name: $thread: median interval between real samples ${real_median:-?} ms, not within 25 % of $interval ms ($lo..$hi)"
    else
      echo "INCONCLUSIVE: $name: $thread had a CPU only $cpu_share of its life in 3 runs (machine busy): median interval ${real_median:-?} ms, effective ${real_mean:-?} ms"
    fi
  done
done

finish
