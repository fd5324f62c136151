#!/usr/bin/env bash
# Scenario: an unmodified two-worker program, preloaded with the base tier in its default mode
# (STRATA_STARTUP=1, interval 1 ms, CPU-time sampling), against gperftools' CPU profiler at
# the same requested rate (CPUPROFILE_FREQUENCY=1000) on the same binary (issue 3, Acceptance).
#
# Usage: stacks_test.sh fp|nofp   (two_workers built with / without frame pointers)
#
# Runs, in the order Strata, gperftools, gperftools, Strata (so that a change of machine load
# during the test affects both alike), each worker spinning ~0.6 s of CPU per run. The
# comparison with gperftools needs each worker to have had a CPU (>= 90 % of its life, from
# the program's own CPU and wall times): when other work on the machine took more, a second
# round of 4 runs is tried, and if that is busy too, a shortfall is reported as INCONCLUSIVE
# rather than as a failure.
# Checks, on each Strata profile:
#   - the shared format checker accepts it; GeckoMain (processName = the program) and both
#     workers are there; names are symbolicated and meta.presymbolicated is true;
#   - (first run) the front-end's own importer (profiler-cli) loads it with every thread, the
#     same sample counts, and each worker's <w>_work_loop among its functions;
#   - >= 80 % of each worker's samples contain one of its own functions
#     (spin_<w>_leaf / <w>_work_loop), and none contains the other worker's;
#   - >= 80 % contain the caller <w>_work_loop: the stack is complete even when the sample is
#     in the frameless leaf (the frame-pointer pitfall in sampling-mechanisms.md);
#   - the program's output and exit status are unchanged;
# and over both runs of each profiler, per worker:
#   - Strata's real samples (those with a CPU delta > 0: the thread ran; "same as before"
#     copies of a thread that did not run are not counted) >= gperftools' samples in that
#     worker's functions, scaled to the same CPU time of the worker (which the program
#     prints; two runs rarely get exactly the same), within the counting resolution of one
#     sample per run.
# Under TSan (scenario_lib.sh, UNDER_TSAN) the stack-content checks, the front-end's function
# check and the comparison with gperftools are skipped with a printed reason; one round of two
# Strata runs keeps the rest.
source "$(dirname "$0")/scenario_lib.sh"

variant="${1:?usage: stacks_test.sh fp|nofp}"
program="$(binary "tests/two_workers_$variant")"
libprofiler="$(find_libprofiler)"
iterations=11000000  # ~0.6 s of CPU per worker and run.

# Per "round:worker": real samples, all samples, worker CPU ms; per round: the smallest CPU
# share any worker got in any of its runs.
declare -A strata_samples strata_all gp_samples strata_cpu gp_cpu min_share
round=1

strata_run() {
  local name="$1"
  run_profiled "$name" "$program" --iterations "$iterations"
  show_run "$name"
  require_profile "$name" || return
  check_format "$name"
  stats "$name" \
    "worker-alpha:spin_alpha_leaf|alpha_work_loop" "worker-beta:spin_beta_leaf|beta_work_loop" \
    "worker-alpha:alpha_work_loop" "worker-beta:beta_work_loop" \
    "worker-alpha:alpha_thread_main" "worker-beta:beta_thread_main" \
    "worker-alpha:beta_" "worker-beta:alpha_" || return

  [[ "$(field "$name" profile "" version)" == 36 ]] || fail "$name: meta.version is not 36"
  [[ "$(field "$name" profile "" presymbolicated)" == 1 ]] ||
    fail "$name: meta.presymbolicated is not true in a symbolicated profile"
  require_thread_listed "$name" GeckoMain
  local process_name
  process_name="$(field "$name" thread name=GeckoMain processName)"
  if [[ "$process_name" == "$(basename "$program")" ]]; then
    pass "$name: GeckoMain's processName is '$process_name'"
  else
    fail "$name: GeckoMain's processName is '$process_name', expected '$(basename "$program")'"
  fi
  grep -q '^two_workers: done exit_code=0$' "$WORK/$name.out" ||
    fail "$name: the program's output is not what it prints without the profiler"
  if [[ "$name" == *_r1_1 ]]; then
    if skip_under_tsan "$name: each worker's function among its imported functions"; then
      check_frontend "$name"
    else
      check_frontend "$name" worker-alpha:alpha_work_loop worker-beta:beta_work_loop
    fi
  fi

  local w thread other own_pct loop_pct entry_pct foreign
  for w in alpha beta; do
    thread="worker-$w"
    other=$([[ $w == alpha ]] && echo beta || echo alpha)
    if ((UNDER_TSAN)); then
      # A spinning worker is sampled once, when it stops, or not at all (the scenario header
      # of scenario_lib.sh): present, with its sample count unchecked.
      require_thread_listed "$name" "$thread"
      skip_under_tsan "$name: $thread's stack content (own functions, caller ${w}_work_loop, no ${other}_ function) and sample counts against gperftools"
      continue
    fi
    require_thread "$name" "$thread"
    own_pct=$(field "$name" match "patterns=spin_${w}_leaf|${w}_work_loop" pct)
    loop_pct=$(field "$name" match "patterns=${w}_work_loop" pct)
    entry_pct=$(field "$name" match "patterns=${w}_thread_main" pct)
    foreign=$(field "$name" match "patterns=${other}_" count)
    result "scenario=stacks variant=$variant run=$name thread=$thread" \
      "samples=$(field "$name" thread "name=$thread" samples)" \
      "real_samples=$(field "$name" thread "name=$thread" cpu_samples)" \
      "own_function_pct=$own_pct caller_${w}_work_loop_pct=$loop_pct" \
      "entry_${w}_thread_main_pct=$entry_pct"
    ge "${own_pct:-0}" 80 && pass "$name: $own_pct % of $thread's samples are in its own functions" ||
      fail "$name: only ${own_pct:-0} % of $thread's samples contain spin_${w}_leaf or ${w}_work_loop (want >= 80 %)"
    ge "${loop_pct:-0}" 80 && pass "$name: $loop_pct % of $thread's samples have the caller ${w}_work_loop" ||
      fail "$name: only ${loop_pct:-0} % of $thread's samples contain the caller ${w}_work_loop (want >= 80 %: stacks must be complete, also in the frameless leaf)"
    [[ "${foreign:-0}" -eq 0 ]] && pass "$name: no $other function in $thread's stacks" ||
      fail "$name: $foreign samples of $thread contain ${other}_ functions"
    local k="$round:$w"
    strata_samples[$k]=$((${strata_samples[$k]:-0} + $(field "$name" thread "name=$thread" cpu_samples)))
    strata_all[$k]=$((${strata_all[$k]:-0} + $(field "$name" thread "name=$thread" samples)))
    strata_cpu[$k]=$(awk -v a="${strata_cpu[$k]:-0}" -v b="$(worker_cpu_ms "$name" "$thread")" 'BEGIN { print a + b }')
    min_share[$round]=$(min "${min_share[$round]:-1}" "$(worker_share "$name" "$thread")")
  done
}

gperf_run() {
  local name="$1"
  if [[ -z "$libprofiler" ]]; then
    fail "gperftools' libprofiler.so is not installed (tools/setup.sh installs libgoogle-perftools-dev)"
    return
  fi
  env LD_PRELOAD="$(preload_value "$libprofiler")" CPUPROFILE="$OUT/$name.prof" CPUPROFILE_FREQUENCY=1000 \
    "$program" --iterations "$iterations" >"$WORK/$name.out" 2>"$WORK/$name.err"
  echo "--- $name: status $?; stderr: $(cat "$WORK/$name.err")"
  if ! "$GPERF_COUNT" "$OUT/$name.prof" "$program" alpha=spin_alpha_leaf,alpha_work_loop \
      beta=spin_beta_leaf,beta_work_loop >"$WORK/$name.stats" 2>&1; then
    fail "$name: cannot read gperftools' profile: $(cat "$WORK/$name.stats")"
    return
  fi
  sed 's/^/    /' "$WORK/$name.stats"
  local w n k
  for w in alpha beta; do
    k="$round:$w"
    n=$(awk -v g="$w" '$2 == "group=" g { sub("samples=", "", $3); print $3 }' "$WORK/$name.stats")
    gp_samples[$k]=$((${gp_samples[$k]:-0} + n))
    gp_cpu[$k]=$(awk -v a="${gp_cpu[$k]:-0}" -v b="$(worker_cpu_ms "$name" "worker-$w")" 'BEGIN { print a + b }')
    min_share[$round]=$(min "${min_share[$round]:-1}" "$(worker_share "$name" "worker-$w")")
  done
}

if ((UNDER_TSAN)); then
  # Two Strata runs for the checks that still hold; no gperftools runs and no comparison.
  strata_run "two_workers_${variant}_r1_1"
  strata_run "two_workers_${variant}_r1_2"
  finish
fi

best=1
for round in 1 2; do
  strata_run "two_workers_${variant}_r${round}_1"
  gperf_run "gperf_${variant}_r${round}_1"
  gperf_run "gperf_${variant}_r${round}_2"
  strata_run "two_workers_${variant}_r${round}_2"
  echo "--- round $round: the smallest CPU share of a worker in its 4 runs: ${min_share[$round]}"
  ge "${min_share[$round]}" "${min_share[$best]}" && best=$round
  # A second round only when the machine was busy with other work during the first.
  ge "${min_share[$round]}" 0.9 && break
done

round=$best
quiet=$(ge "${min_share[$round]}" 0.9 && echo yes || echo no)
for w in alpha beta; do
  thread="worker-$w"
  k="$round:$w"
  s=${strata_samples[$k]:-0}
  g=${gp_samples[$k]:-0}
  s_rate=$(awk -v n="$s" -v ms="${strata_cpu[$k]:-0}" 'BEGIN { if (ms > 0) printf "%.1f", n / ms * 1000; else print 0 }')
  g_rate=$(awk -v n="$g" -v ms="${gp_cpu[$k]:-0}" 'BEGIN { if (ms > 0) printf "%.1f", n / ms * 1000; else print 0 }')
  result "scenario=stacks variant=$variant thread=$thread round=$round min_cpu_share=${min_share[$round]}" \
    "strata_real_samples=$s strata_all_samples=${strata_all[$k]:-0} strata_worker_cpu_ms=${strata_cpu[$k]:-0}" \
    "strata_per_cpu_s=$s_rate gperftools_samples=$g gperftools_worker_cpu_ms=${gp_cpu[$k]:-0}" \
    "gperftools_per_cpu_s=$g_rate"
  if [[ "$g" -eq 0 ]]; then
    fail "$thread: gperftools took no samples in the worker's functions; nothing to compare with"
    continue
  fi
  # Strata's count against gperftools' count scaled to Strata's CPU time (the two runs
  # rarely get exactly the same CPU time), less the counting resolution: a run's first and
  # last tick may or may not yield a sample, so 1 sample per run (2 here).
  expected=$(awk -v g="$g" -v sc="${strata_cpu[$k]:-0}" -v gc="${gp_cpu[$k]:-0}" \
    'BEGIN { if (gc > 0) printf "%.1f", g * sc / gc; else print g }')
  if ge "$((s + 2))" "$expected"; then
    pass "$thread: $s real samples ($s_rate per CPU second); gperftools $g ($g_rate per CPU second, $expected at Strata's CPU time)"
  elif [[ $quiet == yes ]]; then
    fail "$thread: $s real samples ($s_rate per CPU second), fewer than gperftools' $g ($g_rate per CPU second, $expected at Strata's CPU time)"
  else
    # Both profilers' timers fire only at a scheduler tick that finds the thread running;
    # a worker preempted by other work is sampled unevenly by either, so a difference then
    # says nothing about Strata.
    echo "INCONCLUSIVE: $thread: $s real samples ($s_rate per CPU second), gperftools $g ($g_rate per CPU second), but the workers got only ${min_share[$round]} of a CPU (machine busy)"
  fi
done

finish
