#!/usr/bin/env bash
# The command line's rough edges (issue 20, "The command line"): unknown commands suggest the
# nearest, every usage error exits 2 (docs/cli.md), help lists `js` and shows an example per
# command, bad values (`--top -3`) are refused, files that are not profiles say what they are,
# `record` keeps an existing profile as FILE.old, prints the next step, and prints the size of
# a compressed output as the file's.
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
program="$(binary tests/symbols/hot_loop)"
export STRATA_NO_PROGRESS=1
# `record` of a program not built with the sanitizer (sleep, sh, python3) runs with
# "${SANITIZER_ENV[@]}" (scenario_lib.sh): under TSan the runtime must come before libc.

# expect_exit NAME STATUS PATTERN CMD...: CMD's exit status is STATUS and its stderr/stdout
# matches PATTERN (grep -E).
expect_exit() {
  local name="$1" want="$2" pattern="$3"
  shift 3
  "$@" >"$WORK/$name.out" 2>&1
  local got=$?
  if [[ $got -eq $want ]] && grep -qE -- "$pattern" "$WORK/$name.out"; then
    pass "$name: exit $got, says '$(grep -E -- "$pattern" "$WORK/$name.out" | head -1 | cut -c1-100)'"
  else
    fail "$name: exit $got (want $want), output: $(head -3 "$WORK/$name.out")"
  fi
}

expect_exit typo 2 "unknown command 'sumary'; did you mean 'summary'" "$STRATA" sumary x.json
expect_exit unknown 2 "unknown command 'frobnicate'" "$STRATA" frobnicate
expect_exit top_negative 2 "--top" "$STRATA" summary --top -3 x.json
expect_exit no_file 2 "FILE is required" "$STRATA" summary
expect_exit bad_option 2 "--no-such-option" "$STRATA" report --no-such-option x.json
expect_exit bad_format 2 "--to" "$STRATA" convert x.json --to svg -o y
expect_exit help 0 "^  js  " "$STRATA" --help
expect_exit version 0 "^strata $(tr -d ' \n' <"$(dirname "$0")/../../VERSION")$" "$STRATA" --version
for command in record symbolicate summary convert report view js; do
  expect_exit "help_$command" 0 "Example: strata $command" "$STRATA" "$command" --help
done

printf 'PERFILE2\x68\x00\x00\x00\x00\x00\x00\x00' >"$WORK/perf.data"
expect_exit perf_data 1 "is a perf.data file" "$STRATA" summary "$WORK/perf.data"
expect_exit elf 1 "is an ELF file" "$STRATA" report "$program"

# perf's and samply's flags (issue 39): -v, help, -F, -g, --duration; an option record does
# not know is refused, never run as the command.
expect_exit version_short 0 "^strata " "$STRATA" -v
expect_exit help_command 0 "Usage: strata \[OPTIONS\] SUBCOMMAND" "$STRATA" help
expect_exit help_record 0 "Example: strata record" "$STRATA" help record
expect_exit help_unknown 2 "unknown command 'nosuch'" "$STRATA" help nosuch
# -p attaches (docs/attach.md; tests/attach): a bad pid list is a usage error, a process that
# does not exist a refusal.
expect_exit record_pid_usage 2 "is not a process id" "$STRATA" record -p 12,x
expect_exit record_pid_gone 1 "no process 4194303" "$STRATA" record -p 4194303
expect_exit record_typo 2 "did you mean '--frequency'" "$STRATA" record --frequncy 100 -- true
expect_exit record_both_rates 2 "not both" "$STRATA" record -F 100 -i 2 -- true
expect_exit record_bad_graph 2 "call-graph" "$STRATA" record -g lbr -- true
(cd "$WORK" && "$STRATA" record -F 4000 -g fp -o "$WORK/f4000.json" -- "$program" 20000000) \
  >"$WORK/f4000.out" 2>&1 || fail "record -F 4000 -g fp: $(tail -3 "$WORK/f4000.out")"
interval=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['meta']['interval'])" "$WORK/f4000.json" 2>/dev/null)
[[ "$interval" == "0.25" ]] && pass "record -F 4000: meta.interval 0.25 ms" || fail "record -F 4000: meta.interval ${interval:-none}"
(cd "$WORK" && env "${SANITIZER_ENV[@]}" "$STRATA" record --duration 1 -o "$WORK/duration.json" -- sleep 30) >"$WORK/duration.out" 2>&1
duration_status=$?
span=$(python3 - "$WORK/duration.json" <<'PY' 2>/dev/null
import json, sys
p = json.load(open(sys.argv[1]))
t = p["threads"][0]
times = [r[t["samples"]["schema"]["time"]] for r in t["samples"]["data"]]
print(int(max(times) - min(times)) if times else -1)
PY
)
if [[ $duration_status -eq 0 && -n "$span" && "$span" -ge 0 && "$span" -lt 29000 ]] && grep -q -- "--duration" "$WORK/duration.out"; then
  pass "record --duration 1 -- sleep 30: exit 0, stopped and saved ($span ms of samples)"
else
  fail "record --duration 1: status $duration_status, samples span ${span:-none} ms: $(tail -3 "$WORK/duration.out")"
fi

# A program Strata cannot enter is refused before it runs (issue 34), and a run that saved no
# profile is an error, never a silent empty result.
static_program="$(binary tests/cli/static_program)"
if readelf -lW "$static_program" | grep -q INTERP; then
  fail "static_program has a dynamic loader (the test needs a static executable)"
fi
expect_exit static_refused 2 "cannot profile .*statically linked" \
  "$STRATA" record -o "$WORK/static.json" -- "$static_program"
[[ -e "$WORK/static.json" ]] && fail "static_refused: $WORK/static.json was written"
expect_exit nothing_saved 3 "no process saved a profile, nothing written" \
  env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$WORK/static.json" -- sh -c "exec '$static_program'"
grep -qE "note: process [0-9]+ ran .*static_program, which Strata cannot enter \(it is statically linked" \
  "$WORK/nothing_saved.out" && pass "nothing_saved: names the program it could not enter" ||
  fail "nothing_saved: no note of the static program: $(head -3 "$WORK/nothing_saved.out")"
# Programs Strata cannot enter, started inside the recorded tree (a static helper, one run
# with LD_PRELOAD cleared, one started by posix_spawn): the rest is recorded, each of them is
# named on stderr, in the profile's profilingLog (notEntered) and by `strata summary`.
inside_script="'$program' 1000; '$static_program' >/dev/null; env -u LD_PRELOAD '$program' 1000"
inside_script+="; python3 -c 'import os,sys; p=os.posix_spawn(sys.argv[1],[sys.argv[1]],os.environ); os.waitpid(p,0)' '$static_program' >/dev/null"
expect_exit not_entered_inside 0 "note: process [0-9]+ ran .*static_program, which Strata cannot enter" \
  env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$WORK/inside.json" -- sh -c "$inside_script"
static_notes=$(grep -cE "ran .*static_program, which Strata cannot enter \(it is statically linked" "$WORK/not_entered_inside.out")
cleared_notes=$(grep -cE "ran .*hot_loop, which Strata cannot enter \(it was started with LD_PRELOAD cleared" "$WORK/not_entered_inside.out")
[[ "$static_notes" -eq 2 && "$cleared_notes" -eq 1 ]] &&
  pass "not_entered_inside: the static program (exec, posix_spawn) and the cleared one named" ||
  fail "not_entered_inside: $static_notes static and $cleared_notes cleared notes (want 2, 1): $(grep note "$WORK/not_entered_inside.out")"
in_log=$(python3 -c "import json,sys; log=json.load(open(sys.argv[1])).get('profilingLog',{}); print(sum(1 for v in log.values() if 'notEntered' in v))" "$WORK/inside.json" 2>/dev/null)
[[ "$in_log" == 3 ]] && pass "not_entered_inside: 3 notEntered entries in profilingLog" ||
  fail "not_entered_inside: profilingLog has ${in_log:-no} notEntered entries (want 3)"
"$STRATA" summary "$WORK/inside.json" >"$WORK/inside.summary" 2>&1
[[ $(grep -c "notEntered: .*cannot\|notEntered: .*statically linked\|notEntered: .*LD_PRELOAD cleared" "$WORK/inside.summary") -eq 3 ]] &&
  pass "not_entered_inside: strata summary lists them" ||
  fail "not_entered_inside: summary: $(grep -i note "$WORK/inside.summary" | head -3)"
# A set-user-ID or set-group-ID program of another user (the loader ignores LD_PRELOAD in it) is
# refused too; making one needs root (chown), so without it this part is skipped, and says so.
cp "$program" "$WORK/setuid_program" && chmod u+w "$WORK/setuid_program"
if chown 65534 "$WORK/setuid_program" 2>/dev/null && chmod 4755 "$WORK/setuid_program"; then
  expect_exit setuid_refused 2 "cannot profile .*set-user-ID.*without the set-ID bit" \
    "$STRATA" record -o "$WORK/setuid.json" -- "$WORK/setuid_program" 1000
  [[ -e "$WORK/setuid.json" ]] && fail "setuid_refused: $WORK/setuid.json was written"
  cp "$program" "$WORK/setgid_program" && chmod u+w "$WORK/setgid_program"
  chown 0:65534 "$WORK/setgid_program" && chmod 2755 "$WORK/setgid_program"
  expect_exit setgid_refused 2 "cannot profile .*set-group-ID" \
    "$STRATA" record -o "$WORK/setuid.json" -- "$WORK/setgid_program" 1000
else
  echo "skip: setuid_refused: not root, cannot make a set-user-ID program of another user"
fi
# A command that clears LD_PRELOAD for the program it runs: no profile, said, non-zero.
expect_exit preload_cleared 3 "no process saved a profile.*did 'env' clear LD_PRELOAD" \
  "$STRATA" record -o "$WORK/cleared.json" -- env -u LD_PRELOAD "$program" 1000
[[ -e "$WORK/cleared.json" ]] && fail "preload_cleared: $WORK/cleared.json was written"

# record twice to the same file: the first is kept as .old; the next step is printed.
cd "$WORK" || fail "cd $WORK"
"$STRATA" record -- "$program" 50000000 >"$WORK/r1.out" 2>"$WORK/r1.err" || fail "record 1: $(tail -3 "$WORK/r1.err")"
grep -q 'next: strata view strata-profile.json' "$WORK/r1.err" && pass "record: prints the next step" ||
  fail "record: no next step: $(cat "$WORK/r1.err")"
first=$(cksum <"$WORK/strata-profile.json")
"$STRATA" record -- "$program" 50000000 >"$WORK/r2.out" 2>"$WORK/r2.err" || fail "record 2: $(tail -3 "$WORK/r2.err")"
if [[ -f "$WORK/strata-profile.json.old" && "$(cksum <"$WORK/strata-profile.json.old")" == "$first" ]] &&
  grep -q 'kept as strata-profile.json.old' "$WORK/r2.err"; then
  pass "record: the previous profile is kept as strata-profile.json.old, and it says so"
else
  fail "record: no .old kept: $(ls "$WORK") $(cat "$WORK/r2.err")"
fi
# The main thread is named after the program in our outputs (the file keeps "GeckoMain" for
# the front-end, which finds the main thread by that name).
"$STRATA" summary "$WORK/strata-profile.json" >"$WORK/summary.out" 2>&1
"$STRATA" convert "$WORK/strata-profile.json" --to collapsed -o "$WORK/collapsed.txt" 2>/dev/null
if grep -q '"GeckoMain"' "$WORK/strata-profile.json" && ! grep -q GeckoMain "$WORK/summary.out" "$WORK/collapsed.txt" &&
  grep -qE '^ +[0-9]+ +[0-9]+ +hot_loop ' "$WORK/summary.out"; then
  pass "summary and collapsed name the main thread hot_loop, the file keeps GeckoMain"
else
  fail "main thread naming: $(grep -E 'GeckoMain|hot_loop' "$WORK/summary.out" | head -3)"
fi
# convert --to chrome: an independent consumer (the Firefox Profiler's Chrome importer, which
# refuses events without a name and pairs E with B by name) reads every slice back.
"$STRATA" convert "$WORK/strata-profile.json" --to chrome -o "$WORK/trace.json" 2>/dev/null
CLI_JS="$(dirname "$(readlink -f "$0")")/../frontend/node_modules/@firefox-devtools/profiler-cli/dist/profiler-cli.js"
session_dir=$(mktemp -d /tmp/strata-pq.XXXXXX)
PROFILER_CLI_SESSION_DIR="$session_dir" timeout 300 node "$(dirname "$0")/chrome_import_check.js" "$WORK/trace.json" \
  "$CLI_JS" >"$WORK/chrome_import.out" 2>&1
chrome_status=$?
PROFILER_CLI_SESSION_DIR="$session_dir" node "$CLI_JS" stop --all >/dev/null 2>&1 || true
rm -rf "$session_dir"
[[ $chrome_status -eq 0 ]] && pass "convert --to chrome: $(tail -1 "$WORK/chrome_import.out")" ||
  fail "convert --to chrome: $(tail -3 "$WORK/chrome_import.out")"
# A long recording on a terminal says it is still running (script(1) gives it a terminal).
if command -v script >/dev/null; then
  # The command runs until the test has seen the progress line (at most 60 s), not for 6 s:
  # a progress line due at 5 s must not race the command's end on a loaded machine (issue 35).
  # One process (the line counts them): python3 sleeping in a loop, no sleep(1) children;
  # the interpreter itself, not a version manager's shim (pyenv's `python3` is a bash script
  # that runs pyenv, which runs more bash: 6 processes at 5 s on a busy machine, 3 under TSan).
  python="$(python3 -c 'import sys; print(sys.executable)')"
  printf '%s\n' 'import os, sys, time' \
    'for _ in range(600):' \
    '    if os.path.exists(sys.argv[1]): break' \
    '    time.sleep(0.1)' >"$WORK/wait_for_flag.py"
  rm -f "$WORK/long.flag"
  timeout 90 env -u STRATA_NO_PROGRESS script -qec \
    "env ${SANITIZER_ENV[*]} '$STRATA' record -o '$WORK/long.json' -- '$python' '$WORK/wait_for_flag.py' '$WORK/long.flag'" \
    /dev/null >"$WORK/long.raw" 2>&1 &
  long_pid=$!
  for _ in $(seq 600); do
    grep -q 'process(es) running' "$WORK/long.raw" 2>/dev/null && break
    sleep 0.1
  done
  touch "$WORK/long.flag"
  wait "$long_pid"
  tr -d '\r' <"$WORK/long.raw" >"$WORK/long.out"
  grep -q "^strata record: 5 s, 1 process(es) running" "$WORK/long.out" &&
    pass "record on a terminal: a progress line after 5 s" || fail "record: no progress line: $(head -3 "$WORK/long.out")"
  env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$WORK/long2.json" -- sleep 6 >"$WORK/long2.out" 2>&1
  grep -q 'process(es) running' "$WORK/long2.out" && fail "record: a progress line without a terminal" ||
    pass "record without a terminal: no progress line"
else
  fail "script(1) is missing (util-linux)"
fi
"$STRATA" record -o "$WORK/c.json.gz" -- "$program" 50000000 >/dev/null 2>"$WORK/r3.err"
size=$(stat -c %s "$WORK/c.json.gz")
printed=$(sed -n 's/.*samples, \([0-9.]* [A-Za-z]*\)$/\1/p' "$WORK/r3.err" | head -1)
result "gz file $size bytes, printed '$printed'"
expected=$(awk -v b="$size" 'BEGIN { if (b >= 1000000) printf "%.1f MB", b / 1e6; else if (b >= 1000) printf "%.0f kB", b / 1e3; else printf "%d B", b }')
[[ "$printed" == "$expected" ]] && pass "record: a .gz output's printed size is the file's ($printed)" ||
  fail "record: printed '$printed' for a $size-byte file (expected '$expected')"

finish
