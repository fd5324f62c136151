#!/usr/bin/env bash
# Footguns of issue 39, reported once on stderr at the moment they happen (docs/api.md,
# docs/env-vars.md), with the program's status and output unchanged:
#   - a global strata::ProfilerCounter is destroyed before the exit save: a warning naming
#     it, once; the counter allocated and never destroyed is in the saved profile;
#   - STRATA_SHUTDOWN without STRATA_STARTUP (gperftools' CPUPROFILE alone starts its
#     profiler): "no profile saved: profiling never ran in this process", once, and no file;
#     not said with STRATA_SIGNAL (a session may start by signal), nor when the program ran a
#     session itself (ProfilerStart/ProfilerStop);
#   - `LD_PRELOAD=... STRATA_SIGNAL=SIGUSR2 timeout 60 PROGRAM` with the signal sent to timeout:
#     timeout profiles itself, and says once that its child is profiled, with the pid to signal.
source "$(dirname "$0")/../scenario_lib.sh"

PROGRAM="$(binary tests/api/global_counter)"

timeout 60 "$PROGRAM" >"$WORK/plain.out" 2>"$WORK/plain.err"
plain_status=$?
[[ $plain_status == 0 && ! -s "$WORK/plain.err" ]] && pass "plain: status 0, nothing on stderr" \
  || fail "plain: status $plain_status, stderr $(cat "$WORK/plain.err")"

# same_as_plain NAME STATUS: status and stdout of the plain run.
same_as_plain() {
  [[ $2 == "$plain_status" ]] && diff -q "$WORK/plain.out" "$WORK/$1.out" >/dev/null \
    && pass "$1: status and output of the plain run" || fail "$1: status $2, output $(cat "$WORK/$1.out")"
}

# --- A global counter ---------------------------------------------------------------------------
timeout 60 env STRATA_STARTUP=1 STRATA_SHUTDOWN="$OUT/counters.json" "$PROGRAM" >"$WORK/counters.out" 2>"$WORK/counters.err"
same_as_plain counters $?
sed 's/^/    /' "$WORK/counters.err"
[[ $(grep -c "counter 'Global counter' was destroyed while profiling" "$WORK/counters.err") == 1 ]] \
  && grep -q "allocate it with new and never delete it" "$WORK/counters.err" \
  && pass "a global counter: one warning naming it, with the remedy" || fail "a global counter: stderr above"
grep -q '"Kept counter"' "$OUT/counters.json" 2>/dev/null \
  && pass "the counter that is never destroyed is in the saved profile" || fail "no 'Kept counter' in the profile"
grep -q "counter 'Kept counter'" "$WORK/counters.err" && fail "a warning for the kept counter" \
  || pass "no warning for the counter that is kept"

# --- STRATA_SHUTDOWN alone ----------------------------------------------------------------------
timeout 60 env STRATA_SHUTDOWN="$OUT/alone.json" "$PROGRAM" >"$WORK/alone.out" 2>"$WORK/alone.err"
same_as_plain alone $?
sed 's/^/    /' "$WORK/alone.err"
[[ $(grep -c "STRATA_SHUTDOWN=$OUT/alone.json: no profile saved: profiling never ran in this process (set STRATA_STARTUP=1" "$WORK/alone.err") == 1 \
  && ! -e "$OUT/alone.json" ]] && pass "STRATA_SHUTDOWN alone: one message saying why no file, and STRATA_STARTUP=1" \
  || fail "STRATA_SHUTDOWN alone: stderr above"
grep -q "Global counter" "$WORK/alone.err" && fail "STRATA_SHUTDOWN alone: a counter warning without a session" \
  || pass "no counter warning without a session"

timeout 60 env STRATA_SHUTDOWN="$OUT/api.json" "$PROGRAM" --session >"$WORK/api.out" 2>"$WORK/api.err"
same_as_plain api $?
grep -q "never ran in this process" "$WORK/api.err" && fail "a session run by the program: the STRATA_SHUTDOWN message" \
  || pass "STRATA_SHUTDOWN with a session the program ran itself: no message"

timeout 60 env STRATA_SIGNAL=SIGUSR2 STRATA_SHUTDOWN="$OUT/signal.json" "$PROGRAM" >"$WORK/signal.out" 2>"$WORK/signal.err"
same_as_plain signal $?
grep -q "never ran in this process" "$WORK/signal.err" && fail "STRATA_SIGNAL: the STRATA_SHUTDOWN message: $(cat "$WORK/signal.err")" \
  || pass "STRATA_SIGNAL with STRATA_SHUTDOWN: no message (a session starts by signal)"

# --- A preloaded wrapper signalled in place of its program ----------------------------------------
# `LD_PRELOAD=... STRATA_SIGNAL=SIGUSR2 timeout 60 PROGRAM`, `kill -USR2 <timeout's pid>`: the
# wrapper profiles itself; it says so once, naming the program's pid to signal instead.
# wait_for CONDITION...: polls (bounded, 20 s) until the command succeeds.
wait_for() {
  local i
  for ((i = 0; i < 200; i++)); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}
child_is_profiled() {
  local child
  child=$(cat "/proc/$1/task/$1/children" 2>/dev/null | awk '{ print $1 }')
  [[ -n "$child" ]] && grep -q libstrata_base "/proc/$child/maps" 2>/dev/null
}
timeout 60 env LD_PRELOAD="$STRATA_PRELOAD" STRATA_SIGNAL=SIGUSR2 STRATA_SHUTDOWN="$OUT/wrapped.json" \
  timeout 60 "$PROGRAM" --ms 3000 >"$WORK/wrapped.out" 2>"$WORK/wrapped.err" &
outer=$!
wrapper=""
wait_for eval '[[ -n "$(cat /proc/$outer/task/$outer/children 2>/dev/null)" ]]' &&
  wrapper=$(awk '{ print $1 }' "/proc/$outer/task/$outer/children")
if [[ -n "$wrapper" ]] && wait_for child_is_profiled "$wrapper"; then
  program_pid=$(awk '{ print $1 }' "/proc/$wrapper/task/$wrapper/children")
  kill -USR2 "$wrapper"
  wait_for grep -q "STRATA_SIGNAL" "$WORK/wrapped.err"
  kill -USR2 "$wrapper"
  wait "$outer"
  same_as_plain wrapped $?
  sed 's/^/    /' "$WORK/wrapped.err"
  [[ $(grep -c "started profiling 'timeout' (pid $wrapper), which started 'global_counter' (pid $program_pid)" "$WORK/wrapped.err") == 1 ]] \
    && grep -q "kill -12 $program_pid" "$WORK/wrapped.err" \
    && pass "a preloaded timeout signalled in place of its program: one message naming the program's pid" \
    || fail "a preloaded timeout signalled: stderr above"
else
  fail "the wrapped program did not start with the preload"
  wait "$outer"
fi

finish
