#!/usr/bin/env bash
# Scenario: a sampled program that forks (issue 10; docs/reliability.md "Fork").
#
# `fork_program` under the base tier (default mode), the profile path with %p so that every
# process that saves a profile writes its own file:
#
# - fork without exec: the child keeps running (a thread, ~300 ms of CPU, allocations) and
#   exits through exit(). No hang (60 s watchdog); the child sees exactly its own two threads
#   (no Strata sampler thread) and no SIGPROF (fork_program checks both, its status shows
#   it); the child writes no profile (a forked child turns the profiler off, docs/session.md);
#   the parent's profile passes the checker, has GeckoMain and fk-spinner with their own
#   functions (>= 80 % of fk-spinner's samples in parent_spin_loop) and nothing of the child.
# - fork + exec of two_workers_fp (inheriting LD_PRELOAD and STRATA_*): no hang; two
#   profiles, the parent's and the child's (its own pid); the child's passes the checker,
#   is the exec'd program (processName two_workers_fp) and has both workers with their own
#   functions in >= 80 % of their samples; the parent's has no worker thread.
# Under TSan (scenario_lib.sh, UNDER_TSAN): the child without exec starts no thread (TSan
# cannot start threads after a multi-threaded fork: fork_program --child-without-thread; the
# child must then be alone, no sampler thread, no SIGPROF), and the stack-content checks
# (own functions of the parent's and the exec'd child's threads) are skipped; the exec'd
# child's workers need only be listed. Each skip prints its reason.
source "$(dirname "$0")/scenario_lib.sh"

program="$(binary tests/fork_program)"
workers="$(binary tests/two_workers_fp)"

# fork_run NAME ARGS...: the program with the library, profiles to $OUT/NAME-<pid>.json.
fork_run() {
  local name="$1"
  shift
  local start
  start=$(date +%s.%N)
  timeout -s KILL 60 env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
    STRATA_SHUTDOWN="$OUT/$name-%p.json" "$program" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  RUN_STATUS=$?
  RUN_WALL_S=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  cp "$WORK/$name.out" "$WORK/$name.err" "$OUT/" 2>/dev/null || true
  sed 's/^/    /' "$WORK/$name.out"
  if [[ $RUN_STATUS -eq 137 ]]; then
    fail "$name: hang (killed by the 60 s watchdog)"
  elif [[ $RUN_STATUS -ne 0 ]]; then
    fail "$name: exit status $RUN_STATUS"
    sed 's/^/    /' "$WORK/$name.err" | head -20
  else
    pass "$name: no hang, exit status 0 (${RUN_WALL_S}s)"
  fi
}

# match_pct NAME THREAD PATTERN: the share of THREAD's samples with a frame matching PATTERN.
match_pct() {
  "$PROFILE_STATS" "$OUT/$1.json" "$2:$3" 2>/dev/null |
    awk '$1 == "match" { for (i = 2; i <= NF; i++) if ($i ~ /^pct=/) print substr($i, 5) }'
}

# --- fork without exec.
name=fork
child_args=()
expected_tasks=2
if ((UNDER_TSAN)); then
  echo "skipped under TSan: fork: a thread started in the child after the fork (TSan cannot start threads after a multi-threaded fork: \"starting new threads after multi-threaded fork is not supported\"); the child runs without it"
  child_args=(--child-without-thread)
  expected_tasks=1
fi
fork_run "$name" "${child_args[@]}"
parent_pid=$(sed -n 's/^fork_program: parent pid=\([0-9]*\) child_pid=\([0-9]*\).*/\1/p' "$WORK/$name.out")
child_pid=$(sed -n 's/^fork_program: parent pid=\([0-9]*\) child_pid=\([0-9]*\).*/\2/p' "$WORK/$name.out")
child_line=$(grep '^fork_program: child ' "$WORK/$name.out")
result "scenario=fork mode=fork status=$RUN_STATUS ${child_line#fork_program: child }"
if [[ "$child_line" == *"sampler_threads=0 sigprof=0"* && "$child_line" == *"tasks=$expected_tasks "* ]]; then
  pass "$name: the child has only its own threads and got no SIGPROF"
else
  fail "$name: the child reported: ${child_line:-nothing}"
fi
profiles=$(ls "$OUT"/fork-*.json 2>/dev/null | wc -l)
if [[ -n "$child_pid" && -e "$OUT/fork-$child_pid.json" ]]; then
  fail "$name: the forked child wrote a profile (the profiler should be off in it)"
else
  pass "$name: no profile from the forked child ($profiles profile file(s) in all)"
fi
if [[ -n "$parent_pid" && -s "$OUT/fork-$parent_pid.json" ]]; then
  cp "$OUT/fork-$parent_pid.json" "$OUT/fork_parent.json"
  check_format fork_parent
  if stats fork_parent >/dev/null; then
    require_thread fork_parent GeckoMain
    require_thread fork_parent fk-spinner
    forbid_thread fork_parent fk-child-thread
    spin_pct=$(match_pct fork_parent fk-spinner parent_spin_loop)
    main_pct=$(match_pct fork_parent GeckoMain parent_main_work)
    child_pct=$(match_pct fork_parent GeckoMain child_busy_work)
    result "scenario=fork mode=fork parent_spinner_own_pct=$spin_pct parent_main_own_pct=$main_pct parent_child_work_pct=$child_pct"
    if skip_under_tsan "fork_parent: the parent's stack content (fk-spinner in parent_spin_loop, GeckoMain in parent_main_work)"; then
      :
    elif ge "${spin_pct:-0}" 80 && ge "${main_pct:-0}" 1 && ! ge "${child_pct:-0}" 0.01; then
      pass "fork_parent: parent stacks correct (fk-spinner ${spin_pct} % in parent_spin_loop, GeckoMain ${main_pct} % in parent_main_work, none in child_busy_work)"
    else
      fail "fork_parent: parent stacks wrong (spinner ${spin_pct:-?} %, main ${main_pct:-?} %, child work ${child_pct:-?} %)"
    fi
  fi
else
  fail "$name: no parent profile at $OUT/fork-$parent_pid.json"
fi

# --- fork + exec.
name=exec
fork_run "$name" --exec "$workers" --iterations 5500000
parent_pid=$(sed -n 's/^fork_program: parent pid=\([0-9]*\) child_pid=\([0-9]*\).*/\1/p' "$WORK/$name.out")
child_pid=$(sed -n 's/^fork_program: parent pid=\([0-9]*\) child_pid=\([0-9]*\).*/\2/p' "$WORK/$name.out")
if [[ -n "$child_pid" && -s "$OUT/exec-$child_pid.json" ]]; then
  cp "$OUT/exec-$child_pid.json" "$OUT/exec_child.json"
  check_format exec_child
  if stats exec_child >/dev/null; then
    process=$(awk '$1 == "thread" && / name=GeckoMain / { for (i = 2; i <= NF; i++) if ($i ~ /^processName=/) print substr($i, 13) }' "$WORK/exec_child.stats" | head -1)
    [[ "$process" == two_workers_fp ]] && pass "exec_child: the child's own profile (processName $process)" ||
      fail "exec_child: processName is '${process}', not two_workers_fp"
    if ((UNDER_TSAN)); then
      require_thread_listed exec_child worker-alpha
      require_thread_listed exec_child worker-beta
    else
      require_thread exec_child worker-alpha
      require_thread exec_child worker-beta
    fi
    alpha=$(match_pct exec_child worker-alpha alpha_work_loop)
    beta=$(match_pct exec_child worker-beta beta_work_loop)
    result "scenario=fork mode=exec child_alpha_own_pct=$alpha child_beta_own_pct=$beta"
    if skip_under_tsan "exec_child: the workers' stack content and sample counts"; then
      :
    elif ge "${alpha:-0}" 80 && ge "${beta:-0}" 80; then
      pass "exec_child: worker stacks correct (alpha ${alpha} %, beta ${beta} %)"
    else
      fail "exec_child: worker stacks wrong (alpha ${alpha:-?} %, beta ${beta:-?} %)"
    fi
  fi
else
  fail "$name: the exec'd child wrote no profile at $OUT/exec-$child_pid.json"
fi
if [[ -n "$parent_pid" && -s "$OUT/exec-$parent_pid.json" ]]; then
  cp "$OUT/exec-$parent_pid.json" "$OUT/exec_parent.json"
  check_format exec_parent
  if stats exec_parent >/dev/null; then
    require_thread exec_parent fk-spinner
    forbid_thread exec_parent worker-alpha
  fi
else
  fail "$name: no parent profile"
fi

finish
