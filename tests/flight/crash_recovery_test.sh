#!/usr/bin/env bash
# Scenario: the flight recorder (issue 21, docs/flight-recorder.md). flight_program runs 2 s of
# CPU on two threads (label "Crunch", a "Step" interval marker per ~1 ms step), then:
#   control  exits normally (its profile saved at exit, STRATA_SHUTDOWN);
#   segv     writes through a null pointer, with its own SIGSEGV handler (prints, re-raises);
#   abort    calls abort(), with its own SIGABRT handler;
#   kill     is SIGKILLed from outside after its 2 s (it goes on with steps until then).
# Each dying run is made with LD_PRELOAD=libstrata_base.so STRATA_STARTUP=1
# STRATA_FLIGHT_RECORDER=<dir>, and plain:
#   - exit status (signal) and the handler's output are the same with and without Strata;
#   - exactly one .flight file is left; `strata recover` turns it into a profile that passes
#     the format checker and the front-end import;
#   - it has >= 95 % of the samples (GeckoMain + flight-worker, while running) and Step
#     markers of the profile the same process saved after its 2 s (ProfilerSaveProfile; then
#     it ran 300 ms more, or until killed), data (a Step marker and a sample) within the last
#     100 ms before its end, and the end marker "Process crashed";
# The control's own file: a process that saved at exit removes it (none left).
# Without STRATA_FLIGHT_RECORDER no file is written (the feature is what recovers the data).
# Core dumps: with the core limit raised, the segv and abort runs dump core (the kernel's
# WCOREDUMP flag in the wait status) with the recorder as without Strata.
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
PROGRAM="$(binary tests/flight/flight_program)"
CHECK="$(dirname "$(readlink -f "$0")")/flight_check.py"
export STRATA_NO_PROGRESS=1
ulimit -S -c 0  # No core files by default; the status still says the signal. (Soft limit
                # only: the core-dump case below raises it for its own runs.)

# flight_run NAME END [DIR]: the program preloaded, flight recorder in DIR (none when "").
flight_run() {
  local name="$1" end="$2" dir="${3-}"
  local -a extra=(--end "$end" --handler)
  [[ "$end" != exit && -n "$dir" ]] && extra+=(--reference "$OUT/$name-reference.json")
  if [[ "$end" == kill ]]; then
    rm -f "$WORK/$name.ready"
    extra+=(--ready "$WORK/$name.ready")
  fi
  local -a env_flight=()
  [[ -n "$dir" ]] && env_flight=(STRATA_FLIGHT_RECORDER="$dir")
  timeout -s KILL 120 env "${env_flight[@]}" LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
    STRATA_SHUTDOWN="$OUT/$name.json" "$PROGRAM" "${extra[@]}" \
    >"$WORK/$name.out" 2>"$WORK/$name.err" &
  local pid=$!
  if [[ "$end" == kill ]]; then
    for _ in $(seq 1 1200); do
      [[ -e "$WORK/$name.ready" ]] && break
      sleep 0.1
    done
    sleep 0.3
    pkill -KILL -P "$pid" -x flight_program
  fi
  wait "$pid"
  RUN_STATUS=$?
}

# plain_run END: the program without Strata; sets PLAIN_STATUS and PLAIN_HANDLER.
plain_run() {
  local end="$1"
  local -a extra=(--end "$end" --handler)
  [[ "$end" == kill ]] && extra+=(--ready "$WORK/plain-$end.ready")
  rm -f "$WORK/plain-$end.ready"
  timeout -s KILL 120 "$PROGRAM" "${extra[@]}" >"$WORK/plain-$end.out" 2>"$WORK/plain-$end.err" &
  local pid=$!
  if [[ "$end" == kill ]]; then
    for _ in $(seq 1 1200); do
      [[ -e "$WORK/plain-$end.ready" ]] && break
      sleep 0.1
    done
    pkill -KILL -P "$pid" -x flight_program
  fi
  wait "$pid"
  PLAIN_STATUS=$?
  PLAIN_HANDLER=$(grep -c "handler for signal" "$WORK/plain-$end.err")
}

# --- Control: a normal save at exit.
mkdir -p "$WORK/fr-control"
flight_run control exit "$WORK/fr-control"
if [[ $RUN_STATUS -ne 0 || ! -s "$OUT/control.json" ]]; then
  fail "control: status $RUN_STATUS, profile $(ls "$OUT/control.json" 2>&1)"
  sed 's/^/    /' "$WORK/control.err" | head -20
  finish
fi
pass "control: exit 0, profile saved"
left=$(find "$WORK/fr-control" -name '*.flight' | wc -l)
[[ $left -eq 0 ]] && pass "control: the saved process removed its flight recorder file" \
  || fail "control: $left flight recorder file(s) left after a normal save"

# --- A file size limit (ulimit -f) below the file's size: sizing the file would raise SIGXFSZ
# (terminate + core); the recorder must stay off, with the reason on stderr, and the program
# end as without Strata (a 1 MiB limit; the file needs the 64 MiB buffer limit + ~2 MiB).
mkdir -p "$WORK/fr-fsize"
timeout -s KILL 120 bash -c 'ulimit -f 1024; exec "$@"' _ "$PROGRAM" --end exit --ms 100 \
  >"$WORK/fsize-plain.out" 2>&1
fsize_plain=$?
timeout -s KILL 120 bash -c 'ulimit -f 1024; exec "$@"' _ env STRATA_FLIGHT_RECORDER="$WORK/fr-fsize" \
  LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 "$PROGRAM" --end exit --ms 100 \
  >"$WORK/fsize.out" 2>"$WORK/fsize.err"
fsize_status=$?
result "fsize plain_status=$fsize_plain profiled_status=$fsize_status"
if [[ $fsize_status -eq $fsize_plain ]] && grep -q "file size limit.*recording without it" "$WORK/fsize.err"; then
  pass "ulimit -f 1024: status $fsize_status as without Strata, the recorder off with the reason logged"
else
  fail "ulimit -f 1024: status $fsize_status with the recorder, $fsize_plain without; stderr:"
  sed 's/^/    /' "$WORK/fsize.err" | head -10
fi
left=$(find "$WORK/fr-fsize" -name '*.flight' | wc -l)
[[ $left -eq 0 ]] && pass "ulimit -f 1024: no flight recorder file" || fail "ulimit -f 1024: $left file(s) left"

# --- Without the recorder: nothing to recover.
mkdir -p "$WORK/fr-off"
flight_run off segv ""
left=$(find "$WORK/fr-off" -name '*.flight' | wc -l)
[[ $left -eq 0 ]] && pass "without STRATA_FLIGHT_RECORDER: no file" || fail "without STRATA_FLIGHT_RECORDER: $left file(s)"

for end in segv abort kill; do
  plain_run "$end"
  dir="$WORK/fr-$end"
  mkdir -p "$dir"
  flight_run "$end" "$end" "$dir"
  handler=$(grep -c "handler for signal" "$WORK/$end.err")
  result "end=$end plain_status=$PLAIN_STATUS profiled_status=$RUN_STATUS plain_handler=$PLAIN_HANDLER profiled_handler=$handler"
  if [[ $RUN_STATUS -eq $PLAIN_STATUS && $handler -eq $PLAIN_HANDLER && $RUN_STATUS -gt 128 ]]; then
    pass "$end: status $RUN_STATUS (signal $((RUN_STATUS - 128))) and handler output as without Strata"
  else
    fail "$end: status $RUN_STATUS / handler lines $handler with Strata, $PLAIN_STATUS / $PLAIN_HANDLER without"
    sed 's/^/    /' "$WORK/$end.err" | head -20
  fi
  mapfile -t files < <(find "$dir" -name '*.flight')
  if [[ ${#files[@]} -ne 1 ]]; then
    fail "$end: ${#files[@]} flight recorder files in $dir (expected 1)"
    continue
  fi
  if ! "$STRATA" recover "${files[0]}" -o "$OUT/$end.json" >"$WORK/$end.recover" 2>&1; then
    fail "$end: strata recover failed:"
    sed 's/^/    /' "$WORK/$end.recover"
    continue
  fi
  sed 's/^/    /' "$WORK/$end.recover"
  check_format "$end"
  # Against the save the same process made at the end of its 2 s (then it ran 300 ms more):
  # everything that save had must be there.
  if python3 "$CHECK" "$OUT/$end-reference.json" "$OUT/$end.json" --end-name "Process crashed" \
    >"$WORK/$end.check" 2>&1; then
    pass "$end: recovered >= 95 % of the samples and markers of a save at 2 s, and data up to the last 100 ms"
  else
    fail "$end: the recovered profile falls short:"
  fi
  sed 's/^/    /' "$WORK/$end.check"
  grep '^RESULT' "$WORK/$end.check" | sed "s/^RESULT /RESULT end=$end /"
  if stats "$end"; then
    check_frontend "$end" "flight-worker:flight_mix"
  fi
done

# --- Core dumps: the same as without Strata.
# core_dumped DIR ARGS...: runs ARGS in DIR with the core limit raised to the hard limit; prints
# "SIGNAL COREDUMP" from the wait status (os.WCOREDUMP: set when the kernel dumped core, whatever
# kernel.core_pattern says).
core_dumped() {
  python3 - "$@" <<'PY'
import os, resource, subprocess, sys
soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
child = subprocess.Popen(sys.argv[2:], cwd=sys.argv[1], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
_, status = os.waitpid(child.pid, 0)
signaled = os.WIFSIGNALED(status)
print(os.WTERMSIG(status) if signaled else -1, int(signaled and os.WCOREDUMP(status)))
PY
}
if [[ "$(ulimit -H -c)" == 0 ]]; then
  result "core dumps not compared: the hard core limit is 0"
else
  for end in segv abort; do
    mkdir -p "$WORK/core-plain-$end" "$WORK/core-flight-$end" "$WORK/fr-core-$end"
    plain_core=$(core_dumped "$WORK/core-plain-$end" "$PROGRAM" --end "$end" --handler)
    flight_core=$(core_dumped "$WORK/core-flight-$end" env STRATA_FLIGHT_RECORDER="$WORK/fr-core-$end" \
      LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 STRATA_SHUTDOWN="$OUT/core-$end.json" \
      "$PROGRAM" --end "$end" --handler)
    result "core end=$end plain='$plain_core' flight='$flight_core' (signal, core dumped)"
    # Under TSan no process dumps core, Strata or not: TSan's runtime sets its core limit to 0
    # (its flag disable_coredump, on by default: the shadow mappings would be dumped).
    want_dumped=1
    skip_under_tsan "$end: a core dumped (TSan's disable_coredump; the two runs still compared)" &&
      want_dumped=0
    if [[ "$plain_core" == "$flight_core" && "${plain_core#* }" == "$want_dumped" ]]; then
      pass "$end: core dumped with the flight recorder as without Strata ($flight_core)"
    else
      fail "$end: without Strata '$plain_core', with the recorder '$flight_core' (signal, core dumped)"
    fi
    rm -rf "$WORK/core-plain-$end" "$WORK/core-flight-$end"
  done
fi

finish
