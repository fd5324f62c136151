#!/usr/bin/env bash
# A busy machine on demand (issue 35): what the suite must hold beside. Runs
#   - N busy processes (default 4: 2 per CPU on the 2-core CI machine), CPU-bound all along;
#   - every few seconds (default 3) a burst: F forked processes (default 50, each ~5 ms of CPU,
#     then exit) and a thread storm: one process starts T threads (default 200), which wait
#     at a gate until all are started, then all run at once (~5 ms of CPU each, hashing with
#     the GIL released) and exit: ~2 s of CPU per burst at the defaults;
# until killed (SIGINT, SIGTERM, SIGHUP) or for --seconds S. Bounded: at most one burst at a
# time (a round whose last burst still runs has none), each burst under a 10 s deadline, every
# process it started is killed and reaped when it exits, by its own pid (never by name).
#
#   tools/load.sh [--busy N] [--storm-threads T] [--forks F] [--every S] [--seconds S] [--quiet]
#
# Beside the tests (tests/README.md, "Load"):
#   tools/load.sh --seconds 1800 & load=$!
#   bazel test //tests/flight:record_child_test --runs_per_test=5
#   kill $load
# Needs bash and python3 only. Prints one line per burst (unless --quiet) and a summary.
set -u
busy=4
storm_threads=200
forks=50
every=3
seconds=0
quiet=0
usage() {
  echo "usage: $0 [--busy N] [--storm-threads T] [--forks F] [--every S] [--seconds S] [--quiet]" >&2
  exit 2
}
number() { [[ "$2" =~ ^[0-9]+$ ]] || { echo "$0: $1 wants a whole number, not '$2'" >&2; usage; }; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --busy) number "$1" "${2-}"; busy="$2"; shift 2 ;;
    --storm-threads) number "$1" "${2-}"; storm_threads="$2"; shift 2 ;;
    --forks) number "$1" "${2-}"; forks="$2"; shift 2 ;;
    --every) number "$1" "${2-}"; every="$2"; shift 2 ;;
    --seconds) number "$1" "${2-}"; seconds="$2"; shift 2 ;;
    --quiet) quiet=1; shift ;;
    -h|--help) usage ;;
    *) usage ;;
  esac
done
# Bounds: a load generator must not become the machine's problem.
((busy <= 64)) || { echo "$0: --busy at most 64" >&2; exit 2; }
((storm_threads <= 2000)) || { echo "$0: --storm-threads at most 2000" >&2; exit 2; }
((forks <= 500)) || { echo "$0: --forks at most 500" >&2; exit 2; }
((every >= 1)) || { echo "$0: --every at least 1" >&2; exit 2; }
command -v python3 >/dev/null || { echo "$0: needs python3" >&2; exit 2; }

BUSY_PIDS=()
BURST_PID=""
SLEEP_PID=""
bursts=0
started=$(date +%s)

cleanup() {
  trap - EXIT INT TERM HUP
  local pids=("${BUSY_PIDS[@]}")
  [[ -n "$BURST_PID" ]] && pids+=("$BURST_PID")
  [[ -n "$SLEEP_PID" ]] && pids+=("$SLEEP_PID")
  if ((${#pids[@]} > 0)); then
    kill -TERM "${pids[@]}" 2>/dev/null
    wait "${pids[@]}" 2>/dev/null
  fi
  echo "load: stopped after $(($(date +%s) - started)) s: $busy busy processes, $bursts bursts" \
    "($storm_threads threads and $forks forks each)"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# The busy processes: `exec` so that the pid kept is the loop itself (no orphaned subshell).
for ((i = 0; i < busy; ++i)); do
  bash -c 'exec -a strata-load-busy bash -c "while :; do :; done"' &
  BUSY_PIDS+=($!)
done

# One burst: a storm of short-lived threads in one process, and short-lived forked processes,
# all ended by a deadline of 10 s (a burst normally takes well under a second of CPU).
# hashlib releases the GIL for inputs over 2 KiB, so the threads really run at once.
burst() {
  exec -a strata-load-burst python3 - "$storm_threads" "$forks" <<'EOF'
import hashlib, os, signal, sys, threading, time
threads_wanted, forks_wanted = int(sys.argv[1]), int(sys.argv[2])
deadline = time.monotonic() + 10
signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
data = os.urandom(64 * 1024)

gate = threading.Event()

def work():
    for _ in range(150):  # ~5 ms of CPU
        hashlib.sha256(data).digest()

def storm_thread():
    gate.wait(max(0.0, deadline - time.monotonic()))  # All runnable at once: the storm.
    work()

children = []
for _ in range(forks_wanted):
    if time.monotonic() > deadline:
        break
    pid = os.fork()
    if pid == 0:
        try:
            work()
        finally:
            os._exit(0)
    children.append(pid)
threads = []
for _ in range(threads_wanted):
    if time.monotonic() > deadline:
        break
    try:
        t = threading.Thread(target=storm_thread, daemon=True)
        t.start()
        threads.append(t)
    except RuntimeError:  # can't start new thread: the machine's limit, not ours to push
        break
gate.set()
for t in threads:
    t.join(max(0.0, deadline - time.monotonic()))
for pid in children:
    try:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
EOF
}

[[ $quiet == 1 ]] || echo "load: $busy busy processes (pids ${BUSY_PIDS[*]}), a burst of" \
  "$storm_threads threads and $forks forks every ${every} s," \
  "$([[ $seconds -gt 0 ]] && echo "for $seconds s" || echo "until killed") (pid $$)"
while :; do
  now=$(date +%s)
  if ((seconds > 0 && now - started >= seconds)); then break; fi
  # At most one burst at a time: while the last one runs, this round has none.
  if [[ -n "$BURST_PID" ]] && ! kill -0 "$BURST_PID" 2>/dev/null; then
    wait "$BURST_PID" 2>/dev/null
    BURST_PID=""
  fi
  if [[ -z "$BURST_PID" ]]; then
    burst &
    BURST_PID=$!
    bursts=$((bursts + 1))
    [[ $quiet == 1 ]] || echo "load: burst $bursts at $((now - started)) s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  fi
  sleep "$every" &
  SLEEP_PID=$!
  wait "$SLEEP_PID"
  SLEEP_PID=""
done
exit 0
