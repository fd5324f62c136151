#!/usr/bin/env bash
# Host safety, fork (issue 16; docs/session.md "fork"): the public API in fork()ed children.
#
# fork_api_program forks 200 children while its threads record markers, labels and counters,
# save the profile in a loop (session lock) and create short threads (registry lock); each
# child calls the public API (ProfilerSaveProfile, ProfilerGetProfile, markers, counters,
# thread registration, start/stop...) and _exits. Run three ways: plain (the library linked
# but no session), preloaded with STRATA_STARTUP=1, and under `strata record`. Each run must:
#   - end with the plain run's exit status (0) and output (every child exited, none hung:
#     the program kills children still running 60 s after its last fork);
#   - leave no temporary file (*.tmp*) and no child profile in the program's directory (a
#     child's ProfilerSaveProfile returns false at once and makes no file);
#   - under the profiler, save the parent's profile at exit, which passes the format checker.
# Without the fork checks of the public calls, 77-118 of 200 children hung on the session
# lock and left empty .tmp files.
source "$(dirname "$0")/../scenario_lib.sh"

program="$(binary tests/host_safety/fork_api_program)"
STRATA="$(binary tools/strata/strata)"
children=200
child_args=()
if ((UNDER_TSAN)); then
  echo "skipped under TSan: a thread started in each child (TSan cannot start threads after a multi-threaded fork); the children run without it"
  child_args=(--child-without-thread)
fi

# after_run NAME DIR: the common checks.
after_run() {
  local name="$1" dir="$2"
  cp "$WORK/$name.out" "$WORK/$name.err" "$OUT/" 2>/dev/null || true
  sed 's/^/    /' "$WORK/$name.out"
  result "scenario=host-fork run=$name status=$RUN_STATUS $(sed -n 's/^fork_api: //p' "$WORK/$name.out")"
  if [[ $RUN_STATUS -eq 137 ]]; then
    fail "$name: the program itself hung (killed by the watchdog)"
  elif [[ $RUN_STATUS -ne $plain_status ]]; then
    fail "$name: exit status $RUN_STATUS, $plain_status without the profiler"
    sed 's/^/    /' "$WORK/$name.err" | head -20
  else
    pass "$name: exit status $RUN_STATUS as without the profiler"
  fi
  if [[ "$(cat "$WORK/$name.out")" == "$plain_out" ]]; then
    pass "$name: same output as without the profiler"
  else
    fail "$name: output differs from the plain run's ($plain_out)"
  fi
  local leftovers
  leftovers=$(find "$dir" "$OUT" -name '*.tmp*' -o -name 'child-*.json' | head -5)
  if [[ -z "$leftovers" ]]; then
    pass "$name: no temporary file, no child profile"
  else
    fail "$name: files left by the children: $(echo $leftovers)"
  fi
}

# --- plain: the same program, no session.
name=plain
dir="$WORK/$name.dir"
mkdir -p "$dir"
timeout -s KILL 180 "$program" "$dir" "$children" "${child_args[@]}" >"$WORK/$name.out" 2>"$WORK/$name.err"
RUN_STATUS=$?
plain_status=0
plain_out="fork_api: children=$children exited=$children hung=0 wrong_status=0"
after_run "$name" "$dir"
plain_status=$RUN_STATUS
plain_out="$(cat "$WORK/$name.out")"

# --- preloaded, STRATA_STARTUP=1.
name=preload
dir="$WORK/$name.dir"
mkdir -p "$dir"
timeout -s KILL 180 env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 STRATA_STARTUP_BUFFER_MB=4 \
  STRATA_SHUTDOWN="$OUT/$name.json" "$program" "$dir" "$children" "${child_args[@]}" \
  >"$WORK/$name.out" 2>"$WORK/$name.err"
RUN_STATUS=$?
after_run "$name" "$dir"
[[ -s "$OUT/$name.json" ]] && check_format "$name" || fail "$name: no profile at exit"

# --- strata record.
name=record
dir="$WORK/$name.dir"
mkdir -p "$dir"
timeout -s KILL 180 env "${SANITIZER_ENV[@]}" STRATA_STARTUP_BUFFER_MB=4 "$STRATA" record \
  -o "$OUT/$name.json" -- "$program" "$dir" "$children" "${child_args[@]}" >"$WORK/$name.out" 2>"$WORK/$name.err"
RUN_STATUS=$?
# strata record's own lines go to stderr; the program's output is compared as is.
after_run "$name" "$dir"
[[ -s "$OUT/$name.json" ]] && check_format "$name" || fail "$name: no profile from strata record"

finish
