#!/usr/bin/env bash
# Scenario: the environment-variable contract of the base tier (issue 3, Acceptance), on the
# unmodified two-worker program (short runs):
#   STRATA_HELP=1        prints every variable (and the feature names), exits 0, main never runs;
#   bad values           STRATA_STARTUP_INTERVAL=abc / -5 / 1e9 / 0, STRATA_STARTUP_BUFFER_MB=abc,
#                        STRATA_STARTUP_FEATURES=bogus: a message naming the variable (with a
#                        range for numbers), the default used, the profile still written;
#   unwritable path      STRATA_SHUTDOWN=/nonexistent-dir/p.json: an error naming the path on
#                        stderr, the program's own exit status (7) unchanged;
#   exit status          kept when the profile is written too;
#   %p                   STRATA_SHUTDOWN=.../pid-%p.json names the file after the pid, and the
#                        directory holds nothing else afterwards (temp file renamed).
source "$(dirname "$0")/scenario_lib.sh"

program="$(binary tests/two_workers_fp)"
short=(--iterations 1000000)

# --- STRATA_HELP=1
env LD_PRELOAD="$STRATA_PRELOAD" STRATA_HELP=1 "$program" >"$WORK/help.out" 2>&1
status=$?
echo "--- help: status $status"
sed 's/^/    /' "$WORK/help.out"
[[ $status -eq 0 ]] && pass "help: exit status 0" || fail "help: exit status $status, expected 0"
if grep -q '^two_workers: start' "$WORK/help.out"; then
  fail "help: the program's main ran; STRATA_HELP=1 should print and exit"
fi
missing=()
for word in STRATA_HELP STRATA_STARTUP STRATA_SHUTDOWN STRATA_STARTUP_INTERVAL \
    STRATA_STARTUP_FEATURES STRATA_STARTUP_FILTERS STRATA_STARTUP_BUFFER_MB STRATA_LOGGING \
    stackwalk threads cpu precise framepointers rawaddresses; do
  grep -qw -- "$word" "$WORK/help.out" || missing+=("$word")
done
((${#missing[@]} == 0)) && pass "help: lists every variable and feature" ||
  fail "help: does not mention: ${missing[*]}"
result "scenario=env case=help status=$status lines=$(wc -l <"$WORK/help.out") missing=${#missing[@]}"

# --- bad values
bad_value() {
  local var="$1" value="$2" want_number="$3" tag="$4"
  local name="bad_$tag"
  run_profiled "$name" env "$var=$value" "$program" "${short[@]}"
  local message
  message=$(grep -- "$var" "$WORK/$name.err" | head -3)
  echo "--- $name ($var=$value): status $RUN_STATUS; message: ${message:-<none>}"
  result "scenario=env case=bad-value var=$var value=$value status=$RUN_STATUS" \
    "message=\"$(echo "$message" | head -1)\""
  if [[ -z "$message" ]]; then
    fail "$name: no message naming $var on stderr for the bad value '$value'"
    sed 's/^/    stderr: /' "$WORK/$name.err" | head -10
  elif [[ "$want_number" == number ]] && ! grep -q '[0-9]' <<<"${message//"$value"/}"; then
    fail "$name: the message for $var=$value gives no accepted range: $message"
  else
    pass "$name: message: $message"
  fi
  if require_profile "$name" && stats "$name" >/dev/null; then
    require_thread "$name" worker-alpha
    if [[ "$var" == STRATA_STARTUP_INTERVAL ]]; then
      # The requested interval (profilingLog.requestedInterval): meta.interval is what a sample
      # stands for, ~4 ms where perf events are refused and CPU-clock timers sample at the tick.
      interval=$(python3 -c 'import json, sys
p = json.load(open(sys.argv[1])); logs = list(p.get("profilingLog", {}).values())
v = logs[0].get("requestedInterval") if logs else None
print("%g" % (v if v is not None else p["meta"]["interval"]))' "$OUT/$name.json")
      [[ "$interval" == 1 ]] && pass "$name: the default interval (1 ms) is used" ||
        fail "$name: the requested interval is $interval after $var=$value, expected the default 1"
    fi
  fi
}
bad_value STRATA_STARTUP_INTERVAL abc number interval_abc
bad_value STRATA_STARTUP_INTERVAL -5 number interval_negative
bad_value STRATA_STARTUP_INTERVAL 1e9 number interval_huge
bad_value STRATA_STARTUP_INTERVAL 0 number interval_zero
bad_value STRATA_STARTUP_BUFFER_MB abc number buffer_abc
bad_value STRATA_STARTUP_FEATURES bogus word features_bogus

# --- unwritable STRATA_SHUTDOWN: a clear error, the program's exit status unchanged.
name=unwritable
STRATA_SHUTDOWN=/nonexistent-dir/p.json run_profiled "$name" "$program" "${short[@]}" --exit-code 7
show_run "$name"
result "scenario=env case=unwritable-path status=$RUN_STATUS" \
  "message=\"$(grep -m1 -- /nonexistent-dir "$WORK/$name.err")\""
[[ $RUN_STATUS -eq 7 ]] && pass "$name: exit status 7 kept" ||
  fail "$name: exit status $RUN_STATUS, the program returned 7"
grep -q -- /nonexistent-dir/p.json "$WORK/$name.err" &&
  pass "$name: the error names the path" ||
  fail "$name: no error naming /nonexistent-dir/p.json on stderr"
grep -q '^two_workers: done exit_code=7$' "$WORK/$name.out" ||
  fail "$name: the program did not run to its end"

# --- exit status kept when the profile is written
name=exit_status
run_profiled "$name" "$program" "${short[@]}" --exit-code 7
[[ $RUN_STATUS -eq 7 ]] && pass "$name: exit status 7 kept" ||
  fail "$name: exit status $RUN_STATUS, the program returned 7"
[[ -s "$OUT/$name.json" ]] && check_format "$name" || fail "$name: no profile written"

# --- %p, and nothing left beside the profile
dir="$WORK/pid-dir"
mkdir -p "$dir"
name=pid_pattern
STRATA_SHUTDOWN="$dir/pid-%p.json" run_profiled "$name" "$program" "${short[@]}"
files=("$dir"/*)
echo "--- $name: status $RUN_STATUS; files: ${files[*]##*/}"
if [[ ${#files[@]} -eq 1 && "${files[0]##*/}" =~ ^pid-([0-9]+)\.json$ ]]; then
  pid="${BASH_REMATCH[1]}"
  cp "${files[0]}" "$OUT/$name.json"
  pass "$name: wrote ${files[0]##*/} and nothing else"
  if stats "$name" >/dev/null; then
    profile_pid=$(field "$name" thread name=GeckoMain pid)
    [[ "$profile_pid" == "$pid" ]] && pass "$name: %p is the profiled process's pid ($pid)" ||
      fail "$name: file named after pid $pid, profile says pid $profile_pid"
  fi
else
  fail "$name: expected exactly one file pid-<pid>.json in $dir, found: ${files[*]##*/}"
fi

finish
