#!/usr/bin/env bash
# Scenario: where threads wait (issue 18, docs/sampling.md "Wait stacks"), quiet and, as
# wait_stacks_loaded_test, with 2 busy processes per CPU beside it.
#
# tests/wait_stacks: a worker waits ~200 ms in each wrapped kind of blocking call (read on a
# pipe, poll, epoll_wait, nanosleep, condition variable, contended std::mutex, sem_wait,
# waitpid, accept), each from a function WaitInX called by RunWaitPhases; main waits in
# pthread_join; two threads fight over one std::mutex. Run plain, preloaded
# (STRATA_STARTUP=1) and under `strata record`; for both profiled runs
# (tests/wait_stacks_check.py):
# - >= 99 % of the worker's samples during each wait have WaitInX under RunWaitPhases, and the
#   wait's wall time from samples is within 5 % of the real wait the program measured;
# - main's samples show pthread_join under MainJoinsThreads;
# - the fighters' "Awaiting lock" markers total within 5 % of their contended lock() calls;
# - a read left by siglongjmp from a signal handler (its wrapper never returns) does not hide
#   the next wait (WaitInReadAgain): it is sampled as itself (wait_wrappers.cc, abandoned waits);
# - exit status and output (less the measured durations) are the plain run's.
# Negative control: with the feature off (STRATA_STARTUP_FEATURES=-waitstacks) the checks
# fail (the worker's blocked time shows copies of its last CPU sample): they can see a missing
# wait stack.
source "$(dirname "$0")/scenario_lib.sh"

program="$(binary tests/wait_stacks)"
checker="$(dirname "$(readlink -f "$0")")/wait_stacks_check.py"
[[ -f "$checker" ]] || checker="$_runfiles/tests/wait_stacks_check.py"
STRATA="$(binary tools/strata/strata)"

# The program's output without its measured durations.
shape() { sed -e 's/real_ms=[0-9.]*/real_ms=_/' -e 's/waited_ms=[0-9.]*/waited_ms=_/' \
            -e 's/waits=[0-9]*/waits=_/' "$1"; }

timeout 120 "$program" >"$WORK/plain.out" 2>"$WORK/plain.err"
plain_status=$?
[[ $plain_status -eq 0 ]] || fail "plain run failed (status $plain_status)"

check_run() {  # NAME: the profiled run's status, output and profile.
  local name="$1"
  show_run "$name"
  [[ $RUN_STATUS -eq $plain_status ]] ||
    fail "$name: exit status $RUN_STATUS, the plain run's was $plain_status"
  if [[ "$(shape "$WORK/$name.out")" == "$(shape "$WORK/plain.out")" ]]; then
    pass "$name: output as the plain run's"
  else
    fail "$name: output differs from the plain run's"
  fi
  if [[ ! -s "$OUT/$name.json" ]]; then
    fail "$name: no profile written"
    return
  fi
  check_format "$name"
  WAIT_STACKS_UNDER_TSAN=$UNDER_TSAN python3 "$checker" "$OUT/$name.json" "$WORK/$name.out" \
    >"$WORK/$name.check" 2>&1
  local status=$?
  sed 's/^/    /' "$WORK/$name.check"
  grep '^ok ' "$WORK/$name.check" | sed "s/^ok /RESULT scenario=wait_stacks run=$name /"
  if [[ $status -eq 0 ]]; then
    pass "$name: every wait sampled exactly; lock markers match the measured contention"
  else
    fail "$name: wait stacks:"
    grep '^FAIL' "$WORK/$name.check" | sed 's/^/    /'
  fi
  if stats "$name"; then
    check_frontend "$name" "ws-worker:WaitInRead" "GeckoMain:pthread_join"
  fi
}

STRATA_SHUTDOWN="$OUT/preload.json" run_profiled preload "$program"
check_run preload

name=record
timeout -s KILL 180 env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$OUT/$name.json" -- \
  "$program" >"$WORK/$name.out" 2>"$WORK/$name.err"
RUN_STATUS=$?
check_run "$name"

# Negative control: the same checks fail without wait stacks.
STRATA_STARTUP_FEATURES=-waitstacks STRATA_SHUTDOWN="$OUT/control.json" \
  run_profiled control "$program"
if [[ -s "$OUT/control.json" ]] &&
   ! python3 "$checker" "$OUT/control.json" "$WORK/control.out" >"$WORK/control.check" 2>&1; then
  pass "control: without wait stacks the checks fail ($(grep -c '^FAIL' "$WORK/control.check") failed)"
else
  fail "control: the checks passed (or no profile) without wait stacks: they cannot see a missing wait stack"
fi

finish
