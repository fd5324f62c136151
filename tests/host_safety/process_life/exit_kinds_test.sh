#!/usr/bin/env bash
# Issue 33, "every way a process ends" (docs/session.md "Stop / shutdown"; docs/flight-recorder.md;
# docs/reliability.md "Every way a process and a thread end"). exit_kinds works 0.4 s on two
# threads and then ends by: returning from main (control), _exit, exec (sh -c 'exit 6'), 9
# threads calling exit() at once, and exit() while another thread SIGKILLs, SIGTERMs or
# _exits the process 2-40 ms later (during the exit save, preloaded). Run plain and preloaded
# with STRATA_SHUTDOWN (%p) and STRATA_FLIGHT_RECORDER, outside `strata record`:
#   - never a temporary or partial file (before: .tmp-PID files after 3/3 runs of 9 threads
#     calling exit, and after kills during the save);
#   - another thread's _exit during the save waits for it: the profile is kept (at least 1
#     of the 5 runs; before: 0);
#   - a SIGTERM (default action) during the save is dropped: the profile is kept and the
#     process ends with its own status, 0 as plain (at least 3 of 5; before: 143, no profile,
#     in 4 of 5);
#   - the ends that are not crashes (return, _exit, exec, threads calling exit, another
#     thread's _exit) leave no flight recorder file (before: one 67 MB file per _exit or exec
#     image and per concurrent exit), those that are (SIGKILL, SIGTERM) may keep theirs;
#   - return, _exit, exec, exit from 9 threads: the plain run's exit status and output; the
#     9 threads' exit saves the profile every time (before: lost, .tmp left), which passes the
#     format checker like every profile left;
#   - 8 preloaded `sleep 6` processes with the flight recorder use at most 8 x 6 MiB of disk in
#     the recorder's directory while they sleep (measured 17 MB; before: 549 MB, each file
#     fallocated whole) and leave no file when they exit.
source "$(dirname "$0")/../../scenario_lib.sh"

program="$(binary tests/host_safety/process_life/exit_kinds)"

# run NAME MODE [DELAY]: preloaded, in $WORK/NAME/ (profiles) and $WORK/NAME/flight.
run() {
  local name="$1"; shift
  local dir="$WORK/$name"
  rm -rf "$dir"; mkdir -p "$dir/flight"
  (cd "$dir" && timeout -s KILL 60 env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
    STRATA_SHUTDOWN="$dir/profile-%p.json" STRATA_FLIGHT_RECORDER="$dir/flight" "$program" "$@") \
    >"$WORK/$name.out" 2>"$WORK/$name.err"
  RUN_STATUS=$?
}

# leftovers NAME: temporary files (named .tmp or not a complete profile).
check_files() {
  local name="$1" flight_allowed="$2"
  local dir="$WORK/$name"
  local tmp profiles flights
  tmp=$(find "$dir" -name '*.tmp*' | wc -l)
  profiles=$(ls "$dir" | grep -c '^profile-.*\.json$')
  flights=$(ls "$dir/flight" | wc -l)
  result "scenario=exit-kinds run=$name status=$RUN_STATUS temporary=$tmp profiles=$profiles flight_files=$flights"
  ((tmp == 0)) && pass "$name: no temporary file" || fail "$name: $tmp temporary files left: $(cd "$dir" && find . -name '*.tmp*' | head -3 | tr '\n' ' ')"
  if ((flight_allowed == 0 && flights > 0)); then
    fail "$name: $flights flight recorder files left by a process that did not crash"
  elif ((flight_allowed == 0)); then
    pass "$name: no flight recorder file left"
  fi
  local p
  for p in "$dir"/profile-*.json; do
    [[ -e "$p" ]] || continue
    cp "$p" "$OUT/$name.json"
    check_format "$name"
  done
}

for mode in exit _exit exec exit_threads; do
  timeout -s KILL 60 "$program" "$mode" >"$WORK/plain-$mode.out" 2>&1
  plain_status=$?
  for round in 1 2 3; do
    name="$mode-$round"
    run "$name" "$mode"
    if [[ $RUN_STATUS -eq $plain_status ]] && cmp -s "$WORK/plain-$mode.out" "$WORK/$name.out"; then
      pass "$name: status $RUN_STATUS and output as plain"
    else
      fail "$name: status $RUN_STATUS (plain $plain_status) or output differs"
      sed 's/^/    /' "$WORK/$name.err" | head -5
    fi
    check_files "$name" 0
    profiles=$(ls "$WORK/$name" | grep -c '^profile-.*\.json$')
    case "$mode" in
      exit|exit_threads)
        ((profiles == 1)) && pass "$name: the profile saved at exit" || fail "$name: $profiles profiles (1 expected)" ;;
      *)
        ((profiles == 0)) && pass "$name: no profile (no exit handler runs)" || fail "$name: $profiles profiles (none expected)" ;;
    esac
  done
done

# Ended by another thread during the exit save: whatever the moment, nothing partial. An
# _exit from another thread while the save runs waits for it (bounded), so the profile is
# kept: at least one of the five _exit_thread runs must have it (before: none, the _exit
# ended the process under the save; a loaded machine may delay the save's start past the
# _exit, which then ends the process at once, as it must).
# A SIGTERM (default action) during the save is noted and dropped: without Strata it would
# have found the process gone, so the save completes and the process ends with the program's
# own status, 0, as plain (exit_save_signals.h). Before: killed (143) and no profile in 4 of
# 5 runs (all but the 40 ms one, whose save had ended). A run whose SIGTERM came before the
# save began (the main thread descheduled for the whole delay on a loaded machine) dies by it
# as plain would have, leaving nothing partial; at least 3 of the 5 must keep the profile.
exit_thread_profiles=0
term_kept=0
timeout -s KILL 60 "$program" term_thread 2 >/dev/null 2>&1
term_plain_status=$?
for mode in kill_thread term_thread _exit_thread; do
  for delay in 2 5 10 20 40; do
    name="$mode-$delay"
    run "$name" "$mode" "$delay"
    flight_allowed=1
    [[ $mode == _exit_thread ]] && flight_allowed=0
    check_files "$name" "$flight_allowed"
    kept=$(ls "$WORK/$name" | grep -c '^profile-.*\.json$')
    if [[ $mode == _exit_thread ]]; then
      exit_thread_profiles=$((exit_thread_profiles + kept))
    elif [[ $mode == kill_thread && $RUN_STATUS -eq 137 ]]; then
      # Killed during the save: the profile is lost, the flight recorder's file is kept for
      # strata recover. Killed after it (the profile renamed into place, the process not yet
      # gone: a busy machine makes that window long): the profile is whole (check_files above
      # validated it), and the flight file is gone or, killed between the rename and its
      # removal, still there (strata record prefers the saved profile).
      flights=$(ls "$WORK/$name/flight" | wc -l)
      if ((kept == 1)); then
        ((flights <= 1)) && pass "$name: SIGKILL after the save: the profile is kept ($flights flight file)" ||
          fail "$name: SIGKILL after the save: the profile and $flights flight recorder files"
      else
        ((flights == 1)) && pass "$name: SIGKILL during the save: the flight recorder file is kept" ||
          fail "$name: SIGKILL during the save: $flights flight recorder files (1 expected)"
      fi
    elif [[ $mode == term_thread ]]; then
      if [[ $RUN_STATUS -eq $term_plain_status ]] && ((kept == 1)); then
        term_kept=$((term_kept + 1))
        pass "$name: SIGTERM during the save: profile kept, status $RUN_STATUS as plain"
      elif [[ $RUN_STATUS -eq 143 ]] && ((kept == 0)); then
        pass "$name: SIGTERM before the save began: killed by it, as plain would have been then"
      else
        fail "$name: status $RUN_STATUS (plain $term_plain_status), $kept profiles"
      fi
    fi
  done
done
result "scenario=exit-kinds _exit_thread_profiles_kept=$exit_thread_profiles of 5 term_thread_profiles_kept=$term_kept of 5"
if ((exit_thread_profiles >= 1)); then
  pass "_exit from another thread during the save: $exit_thread_profiles of 5 profiles kept"
else
  fail "_exit from another thread during the save: no profile kept in 5 runs"
fi
if ((UNDER_TSAN)); then
  # Not taken over under ThreadSanitizer by design (exit_save_signals.h: TSan's own signal
  # machinery is in the way): a SIGTERM during the save ends the process, as before the fix.
  echo "skipped under TSan: SIGTERM during the save ($term_kept of 5 profiles kept; the exit save's signal deferral is compiled out under TSan, exit_save_signals.h)"
elif ((term_kept >= 3)); then
  pass "SIGTERM during the save: $term_kept of 5 profiles kept, the program's own status"
else
  fail "SIGTERM during the save: $term_kept of 5 profiles kept (at least 3 expected)"
fi

# Disk used by the flight recorder: 8 sleeping processes.
dir="$WORK/sleepers"
mkdir -p "$dir"
pids=()
for i in 1 2 3 4 5 6 7 8; do
  env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 STRATA_FLIGHT_RECORDER="$dir" sleep 6 &
  pids+=($!)
done
# Until all 8 have started their sessions (a loaded machine can take seconds), at most 5 s.
for _ in $(seq 50); do
  (($(ls "$dir" | wc -l) >= 8)) && break
  sleep 0.1
done
used_kb=$(du -sk "$dir" | cut -f1)
files=$(ls "$dir" | wc -l)
wait "${pids[@]}"
left=$(ls "$dir" | wc -l)
result "scenario=exit-kinds run=sleepers files=$files disk_kb=$used_kb left_after=$left"
if ((files == 8 && used_kb <= 8 * 6 * 1024)); then
  pass "sleepers: 8 flight recorder files using $used_kb kB in all (<= 8 x 6 MiB)"
else
  fail "sleepers: $files flight recorder files using $used_kb kB (expected 8, <= 8 x 6 MiB)"
fi
((left == 0)) && pass "sleepers: no file left after they exited" || fail "sleepers: $left files left after they exited"

finish
