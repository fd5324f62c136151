#!/usr/bin/env bash
# debuginfod (issue 20, Symbols): a stripped program whose debug file only a debuginfod server
# has. `strata symbolicate` with DEBUGINFOD_URLS fetches it through libdw's debuginfod client
# (a real `debuginfod` from Debian serving a directory on 127.0.0.1) and names HotLoop with
# hot_loop.cc:line; without DEBUGINFOD_URLS it cannot. Nothing is fetched at capture time
# inside the profiled program, even with DEBUGINFOD_URLS set (its client cache stays empty).
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
full="$(binary tests/symbols/hot_loop)"
export STRATA_NO_PROGRESS=1
# libdebuginfod's client needs a HOME (Bazel's test environment has none).
export HOME="${HOME:-$WORK}"
command -v debuginfod >/dev/null || fail "debuginfod is missing (tools/setup.sh installs it)"
command -v debuginfod >/dev/null || finish

# The served directory is outside any hidden directory (debuginfod's default exclusion skips
# paths with a "/." component, such as Bazel's ~/.cache).
SERVED="$(mktemp -d /tmp/strata-debuginfod.XXXXXX)"
mkdir -p "$WORK/bin"
objcopy --only-keep-debug "$full" "$SERVED/hot_loop.debug"
objcopy --strip-all "$full" "$WORK/bin/hot_loop"   # No debuglink: only the server has it.
build_id=$(readelf -n "$WORK/bin/hot_loop" | awk '/Build ID/ { print $3 }')
[[ -n "$build_id" ]] || fail "no build-id"

# The server, on a free port (bounded tries); stopped at exit.
server_pid=""
stop_server() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  rm -rf "$SERVED"
  stop_load
}
trap stop_server EXIT
port=""
for try in 1 2 3; do
  candidate=$((20000 + RANDOM % 20000))
  debuginfod -p "$candidate" -d "$SERVED/db.sqlite" -F "$SERVED" >"$WORK/server.log" 2>&1 &
  server_pid=$!
  for ((i = 0; i < 150; i++)); do
    kill -0 "$server_pid" 2>/dev/null || break
    # A fresh client cache per probe: the client remembers a miss (before the server has
    # indexed the directory) for 10 minutes.
    if DEBUGINFOD_URLS="http://127.0.0.1:$candidate" DEBUGINFOD_CACHE_PATH="$WORK/probe-cache-$try-$i" \
      DEBUGINFOD_TIMEOUT=5 debuginfod-find debuginfo "$build_id" >"$WORK/find.out" 2>&1; then
      port=$candidate
      break
    fi
    sleep 0.2
  done
  [[ -n "$port" ]] && break
  kill "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=""
done
[[ -n "$port" ]] || { fail "debuginfod did not serve the debug file: $(tail -5 "$WORK/server.log"; cat "$WORK/find.out")"; finish; }
pass "debuginfod serves build-id $build_id on 127.0.0.1:$port"
URLS="http://127.0.0.1:$port"

# --- capture with DEBUGINFOD_URLS set: the profiled process fetches nothing
mkdir -p "$WORK/capture-cache"
DEBUGINFOD_URLS="$URLS" DEBUGINFOD_CACHE_PATH="$WORK/capture-cache" run_profiled named "$WORK/bin/hot_loop" 200000000
[[ $RUN_STATUS -eq 0 && -s "$OUT/named.json" ]] || fail "named: status $RUN_STATUS or no profile"
if [[ -z "$(find "$WORK/capture-cache" -name debuginfo 2>/dev/null)" ]] && ! grep -q 'HotLoop' "$OUT/named.json"; then
  pass "capture: nothing fetched inside the profiled program (no HotLoop name, empty client cache)"
else
  fail "capture: the profiled program fetched debug info"
fi

# --- raw addresses, symbolicated offline with and without the server
STRATA_STARTUP_FEATURES=rawaddresses run_profiled raw "$WORK/bin/hot_loop" 200000000
[[ $RUN_STATUS -eq 0 && -s "$OUT/raw.json" ]] || fail "raw: status $RUN_STATUS or no profile"
"$STRATA" symbolicate "$OUT/raw.json" -o "$OUT/without.json" >"$WORK/without.err" 2>&1 || fail "symbolicate without: $(cat "$WORK/without.err")"
if grep -q 'HotLoop' "$OUT/without.json"; then
  fail "without DEBUGINFOD_URLS HotLoop is named: the test does not exercise the server"
else
  pass "without DEBUGINFOD_URLS: no name for the stripped function (control)"
fi
mkdir -p "$WORK/cli-cache"
DEBUGINFOD_URLS="$URLS" DEBUGINFOD_CACHE_PATH="$WORK/cli-cache" DEBUGINFOD_TIMEOUT=30 \
  "$STRATA" symbolicate "$OUT/raw.json" -o "$OUT/with.json" >"$WORK/with.err" 2>&1 || fail "symbolicate with: $(cat "$WORK/with.err")"
sed 's/^/    /' "$WORK/with.err"
if grep -q '"HotLoop(unsigned long) (in hot_loop) (tests/symbols/hot_loop.cc:[0-9]*)"' "$OUT/with.json"; then
  pass "with DEBUGINFOD_URLS: HotLoop(unsigned long) with hot_loop.cc:line, from the server's debug file"
else
  fail "with DEBUGINFOD_URLS: HotLoop not named with file:line: $(grep -o '"[^"]*(in hot_loop)[^"]*"' "$OUT/with.json" | head -3)"
fi
[[ -n "$(find "$WORK/cli-cache" -name debuginfo)" ]] && pass "the debug file came through libdw's debuginfod client (cached)" ||
  fail "nothing in the client cache"

finish
