#!/usr/bin/env bash
# Issue 16, `strata record` changes signal semantics: a supervisor saw its child "exited 143"
# instead of "killed by signal 15". A supervisor (supervisor.cc) runs term_target, which
# ends by SIGTERM at the default disposition:
#   wait  the supervisor sends SIGTERM to its child once it is ready: the child is the
#         program (plain, preloaded) or `strata record` (which forwards it);
#   self  the program sends itself SIGTERM.
# The supervisor must say "killed by signal 15" in every way the program runs, and under
# `strata record` the profile must still be written by the program's own process.
source "$(dirname "$0")/../../scenario_lib.sh"
source "$(dirname "$0")/record_lib.sh"

target="$(binary tests/host_safety/record/term_target)"

for mode in wait self; do
  options=()
  [[ $mode == wait ]] && options=(--term-when-ready)
  timeout -k 5 120 "$SUPERVISOR" "${options[@]}" "$target" "$mode" >"$WORK/plain_$mode.out" 2>&1
  [[ "$(verdict "plain_$mode")" == "killed by signal 15" ]] ||
    fail "plain $mode: the supervisor saw '$(verdict "plain_$mode")' (the test program is broken)"

  timeout -k 5 120 "$SUPERVISOR" "${options[@]}" env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
    STRATA_SHUTDOWN="$OUT/preloaded_$mode.json" "$target" "$mode" >"$WORK/preloaded_$mode.out" 2>&1
  [[ "$(verdict "preloaded_$mode")" == "$(verdict "plain_$mode")" ]] &&
    pass "preloaded $mode: $(verdict "preloaded_$mode")" ||
    fail "preloaded $mode: '$(verdict "preloaded_$mode")', plain: '$(verdict "plain_$mode")'"

  name="record_$mode"
  timeout -k 5 120 "$SUPERVISOR" "${options[@]}" env "${SANITIZER_ENV[@]}" "$STRATA" record \
    -o "$OUT/$name.json" -- "$target" "$mode" >"$WORK/$name.out" 2>"$WORK/$name.err"
  result "scenario=supervisor-record mode=$mode plain=\"$(verdict "plain_$mode")\" record=\"$(verdict "$name")\""
  if [[ "$(verdict "$name")" == "$(verdict "plain_$mode")" ]]; then
    pass "record $mode: $(verdict "$name"), as plain"
  else
    fail "record $mode: '$(verdict "$name")', plain: '$(verdict "plain_$mode")'"
    sed 's/^/    stderr: /' "$WORK/$name.err" | head -20
  fi
  if [[ -s "$OUT/$name.json" ]] && stats "$name"; then
    samples=$(field "$name" thread "" samples)
    if grep -q "the command's own process (pid [0-9]*) saved no profile" "$WORK/$name.err"; then
      fail "record $mode: the program's own process saved no profile"
    elif [[ "${samples:-0}" -gt 0 ]]; then
      pass "record $mode: profile written by the program's process, $samples samples"
    else
      fail "record $mode: profile without samples"
    fi
  else
    fail "record $mode: no profile at $OUT/$name.json"
    sed 's/^/    stderr: /' "$WORK/$name.err" | head -20
  fi
done

finish
