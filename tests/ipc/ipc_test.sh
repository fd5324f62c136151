#!/usr/bin/env bash
# Multi-process scenarios (docs/ipc.md). Usage: ipc_test.sh tree|limit|starved|stall|exits|hostile|follow
source "$(dirname "$0")/../scenario_lib.sh"

mode="${1:?mode}"
PARENT="$(binary tests/ipc/ipc_parent)"
CHILD="$(binary tests/ipc/ipc_child)"
# Sockets go to a short private directory (the test's TMPDIR path may not fit in a socket
# address; the transport falls back to /tmp by itself, this keeps it tidy).
export STRATA_IPC_DIR=/tmp
unset STRATA_IPC_PARENT STRATA_STARTUP

"$PARENT" "$CHILD" "$mode" "$OUT/$mode.json" > "$WORK/parent.log" 2> "$WORK/parent.err"
status=$?
cat "$WORK/parent.log"
sed 's/^/stderr: /' "$WORK/parent.err" | head -50
((status == 0)) && grep -q "ipc_parent: ok" "$WORK/parent.log" && pass "in-process checks ($mode)" \
  || fail "in-process checks ($mode)"
grep "^RESULT" "$WORK/parent.log" | sed 's/^RESULT //' | while read -r line; do result "$line"; done
if [[ -f "$OUT/$mode.json" ]]; then
  "$GECKO_CHECK" --quiet "$OUT/$mode.json" && pass "format checker" || fail "format checker"
else
  fail "no profile written"
fi
# The tree imports in the real front-end (profiler-cli): every thread of every process.
if [[ "$mode" == "tree" && -f "$OUT/$mode.json" ]]; then
  source_dir="$(dirname "$(readlink -f "$(dirname "$0")/../scenario_lib.sh")")"
  cli="$source_dir/frontend/node_modules/@firefox-devtools/profiler-cli/dist/profiler-cli.js"
  read -r _ threads expect < <(grep "^FRONTEND" "$WORK/parent.log")
  if ! command -v node >/dev/null || [[ ! -f "$cli" ]]; then
    fail "node or $cli is missing (tools/setup.sh installs them)"
  else
    session_dir=$(mktemp -d /tmp/strata-pq.XXXXXX)
    PROFILER_CLI_SESSION_DIR="$session_dir" node "$source_dir/frontend_threads.js" "$cli" \
      "$OUT/$mode.json" "$threads" $expect > "$WORK/frontend.log" 2>&1
    status=$?
    PROFILER_CLI_SESSION_DIR="$session_dir" node "$cli" stop --all >/dev/null 2>&1 || true
    rm -rf "$session_dir"
    sed "s/^/    /" "$WORK/frontend.log"
    ((status == 0)) && pass "the front-end imports all $threads threads of the four processes" \
      || fail "front-end import (above)"
  fi
fi
finish
