#!/usr/bin/env bash
# `strata view` and `strata record --view` (issue 20, "Viewing"): a real program's profile with
# raw addresses, served on 127.0.0.1; view_check.js makes the requests the Firefox Profiler
# makes (profile with CORS, Tecken symbolicate/v5, source/v1, a 10 000-address request, bad
# JSON, a path outside the profile, two clients) and runs the front-end's own import,
# symbolication and source view through it (profiler-cli). Also: nothing but loopback can
# connect; Ctrl-C (SIGINT) ends the server with status 0; `record --view` serves what it
# recorded and ends as the command did.
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
program="$(binary tests/symbols/hot_loop)"
CHECK_JS="$(dirname "$0")/view_check.js"
CLI_JS="$(dirname "$(readlink -f "$0")")/../frontend/node_modules/@firefox-devtools/profiler-cli/dist/profiler-cli.js"
# The workspace root in the runfiles: Bazel's DWARF names sources relative to it.
SOURCE_ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
export STRATA_NO_PROGRESS=1
command -v node >/dev/null && [[ -f "$CLI_JS" ]] || fail "node or profiler-cli missing (tools/setup.sh installs them)"

# wait_for_address LOG: waits (bounded) until the view prints its addresses; sets PROFILE_URL,
# SYMBOL_SERVER.
wait_for_address() {
  local i
  for ((i = 0; i < 300; i++)); do
    grep -q '^Open: ' "$1" 2>/dev/null && break
    sleep 0.1
  done
  PROFILE_URL=$(awk '/^Profile: /{print $2}' "$1")
  SYMBOL_SERVER=$(awk '/^Symbol server: /{print $3}' "$1")
  [[ -n "$PROFILE_URL" && -n "$SYMBOL_SERVER" ]]
}

# stop_view PID NAME: SIGINT, then the status must be 0 within the bound.
stop_view() {
  local pid="$1" name="$2" i
  kill -INT "$pid"
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"
    fail "$name: still running 10 s after SIGINT"
  fi
  wait "$pid"
  local status=$?
  [[ $status -eq 0 ]] && pass "$name: Ctrl-C ends it with status 0" || fail "$name: status $status after SIGINT"
}

# --- strata view on a preloaded run's raw-address profile
STRATA_STARTUP_FEATURES=rawaddresses run_profiled raw "$program" 200000000
[[ $RUN_STATUS -eq 0 && -s "$OUT/raw.json" ]] || fail "raw: status $RUN_STATUS or no profile"
"$STRATA" view --no-open --port 0 --source-root "$SOURCE_ROOT" "$OUT/raw.json" >"$WORK/view.out" 2>"$WORK/view.err" &
view_pid=$!
if wait_for_address "$WORK/view.out"; then
  pass "view: serves on ${SYMBOL_SERVER%/*}"
  grep -q '^Open: https://profiler.firefox.com/from-url/http%3A%2F%2F127.0.0.1%3A' "$WORK/view.out" &&
    pass "view: prints the profiler.firefox.com address" || fail "view: no front-end address: $(cat "$WORK/view.out")"
  session_dir=$(mktemp -d /tmp/strata-pq.XXXXXX)
  PROFILER_CLI_SESSION_DIR="$session_dir" timeout 300 node "$CHECK_JS" "$PROFILE_URL" "$SYMBOL_SERVER" "$OUT/raw.json" \
    "$CLI_JS" >"$WORK/view_check.out" 2>&1
  check_status=$?
  PROFILER_CLI_SESSION_DIR="$session_dir" node "$CLI_JS" stop --all >/dev/null 2>&1 || true
  rm -rf "$session_dir"
  sed 's/^/    /' "$WORK/view_check.out"
  [[ $check_status -eq 0 ]] && pass "view: the front-end's requests and its own client (above)" ||
    fail "view: view_check failed (above)"
  # Only loopback: the port is not reachable on another address of this machine.
  port="${SYMBOL_SERVER#http://127.0.0.1:}"
  port="${port%%/*}"
  other=$(hostname -I 2>/dev/null | awk '{print $1}')
  if [[ -n "$other" && "$other" != 127.* ]]; then
    if timeout 5 bash -c "exec 3<>/dev/tcp/$other/$port" 2>/dev/null; then
      fail "view: reachable on $other:$port"
    else
      pass "view: not reachable on $other:$port (loopback only)"
    fi
  else
    result "no non-loopback address here: the loopback-only check is skipped"
  fi
else
  fail "view: no address printed: $(cat "$WORK/view.out" "$WORK/view.err")"
fi
stop_view "$view_pid" view

# --- bad input: a missing file, a taken port
"$STRATA" view --no-open "$WORK/missing.json" >/dev/null 2>"$WORK/missing.err"
status=$?
[[ $status -eq 1 ]] && grep -q 'missing.json' "$WORK/missing.err" && pass "view: a missing file is a clear error" ||
  fail "view: missing file: status $status: $(cat "$WORK/missing.err")"

# --- strata record --view: records, serves, ends as the command did
"$STRATA" record -q --view --no-open --port 0 -o "$OUT/recorded.json" -- "$program" 100000000 \
  >"$WORK/record.out" 2>"$WORK/record.err" &
record_pid=$!
if wait_for_address "$WORK/record.out"; then
  code=$(curl -s -o "$WORK/fetched.json" -w '%{http_code}' "$PROFILE_URL" 2>/dev/null ||
    node -e "fetch(process.argv[1]).then(async r => { require('fs').writeFileSync(process.argv[2], await r.text()); console.log(r.status) })" \
      "$PROFILE_URL" "$WORK/fetched.json")
  if [[ "$code" == 200 ]] && cmp -s "$WORK/fetched.json" "$OUT/recorded.json"; then
    pass "record --view: serves the profile it wrote"
  else
    fail "record --view: fetching $PROFILE_URL gave $code"
  fi
  grep -q 'hot_loop: done' "$WORK/record.out" && pass "record --view: the command ran (its output is there)" ||
    fail "record --view: no command output"
else
  fail "record --view: no address: $(tail -5 "$WORK/record.err")"
fi
stop_view "$record_pid" "record --view"

finish
