#!/usr/bin/env bash
# Scenario: sampling never makes a blocking call of the program return early (issue 3,
# Acceptance: "a program that sleeps in nanosleep/poll/read sees no EINTR").
#
# - Negative control: `sleeper` under tests/eintr_injector.so (SIGPROF with SA_RESTART to
#   every thread every 1 ms, as a wall-clock sampler would) must report failures; otherwise
#   the sleeper could not see what this scenario looks for.
# - `sleeper` under the base tier in its default mode: every call (nanosleep, usleep,
#   clock_nanosleep, sleep, poll, select, epoll_wait, read, sem_wait, pthread_cond_wait,
#   waitpid, and nanosleep in the main thread) completes in full, exit status 0, and the
#   profile has all its threads, passes the format checker and imports in the front-end
#   (profiler-cli) with every thread.
# - For information only (not a failure): the same under precise mode, which is documented
#   to interrupt sleeps.
source "$(dirname "$0")/scenario_lib.sh"

program="$(binary tests/sleeper)"
injector="$(binary tests/eintr_injector.so)"

env LD_PRELOAD="$injector" "$program" >"$WORK/control.out" 2>&1
control_status=$?
control_failures=$(sed -n 's/^sleeper: result calls=[0-9]* failures=\([0-9]*\)$/\1/p' "$WORK/control.out")
result "scenario=sleeper mode=control-injector status=$control_status failures=${control_failures:-?}"
if [[ $control_status -ne 0 && "${control_failures:-0}" -gt 0 ]]; then
  pass "control: the sleeper detects interrupted calls (${control_failures} under the injector)"
else
  fail "control: the sleeper saw no interruption under the EINTR injector; it cannot test anything"
  sed 's/^/    /' "$WORK/control.out"
fi

name=sleeper_default
run_profiled "$name" "$program"
show_run "$name"
failures=$(sed -n 's/^sleeper: result calls=[0-9]* failures=\([0-9]*\)$/\1/p' "$WORK/$name.out")
calls=$(sed -n 's/^sleeper: result calls=\([0-9]*\).*/\1/p' "$WORK/$name.out")
result "scenario=sleeper mode=default status=$RUN_STATUS calls=${calls:-?} failures=${failures:-?}"
if [[ $RUN_STATUS -eq 0 && "${failures:-1}" -eq 0 ]]; then
  pass "$name: all $calls blocking calls completed in full"
else
  fail "$name: blocking calls were cut short under default sampling:"
  grep -v 'status=ok' "$WORK/$name.out" | sed 's/^/    /'
fi
if [[ -s "$OUT/$name.json" ]]; then
  check_format "$name"
  if stats "$name"; then
    require_thread_listed "$name" GeckoMain
    require_thread "$name" sl-burner
    for call in nanosleep usleep clocknanosl sleep poll select epoll read semwait condwait waitpid; do
      require_thread_listed "$name" "sl-$call"
    done
    check_frontend "$name"
  fi
else
  fail "$name: no profile written"
fi

# Information only.
name=sleeper_precise
STRATA_STARTUP_FEATURES=precise run_profiled "$name" "$program"
interrupted=$(grep -v 'status=ok' "$WORK/$name.out" | grep -c '^sleeper: call=' || true)
result "scenario=sleeper mode=precise status=$RUN_STATUS interrupted_calls=$interrupted (information only)"
grep -v 'status=ok' "$WORK/$name.out" | grep '^sleeper: call=' | sed 's/^/    precise: /' || true

finish
