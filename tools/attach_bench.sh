#!/usr/bin/env bash
# Attach cost (issue 36, docs/attach.md, docs/benchmarks.md "Attach"): ROUNDS attaches of
# `strata record -p PID --duration 0.2` to tests/attach/echo_server --waiters (6 threads: the
# main one in accept, read, epoll_wait and pthread_cond_wait waiters, a spinner that is always
# on CPU), each measured three ways:
#   first sample  from just before strata is started (its exec included) to the first sample of
#                 the profile it writes (the profile's startTime plus its earliest sample time,
#                 both wall clock): issue 36's "command to first sample"
#   sampling      what strata prints: from its start of the attach to the session running
#   held          what strata prints: the borrowed thread from its stop's report to its release
# and, when `perf` can record the scheduler's tracepoints system-wide (root, or
# perf_event_paranoid <= -1), the stop as the kernel saw it:
#   stop window   from the first moment a thread of the program went into a ptrace stop
#                 (sched_switch with prev_state t) to the last time strata woke one from it
#                 (sched_waking): "from the first thread stopped to the last resumed"; also
#                 which threads of the program were stopped at all (only the borrowed one).
# Medians, 90th percentiles and maxima; the first attach (dlopen loads the library) apart.
#   tools/attach_bench.sh [ROUNDS]      (default 30; builds with -c opt)
#   ATTACH_BENCH_SCHED=0 tools/attach_bench.sh   (no perf: its system-wide recording costs CPU)
#   ATTACH_BENCH_COMPARE=/path/to/other/strata tools/attach_bench.sh
#       each round runs that strata too (another version's, built from another commit), the
#       order alternating, on the same process under the same load: the two side by side.
# Beside a busy machine: tools/load.sh --seconds 600 & ... tools/attach_bench.sh; kill %1
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-30}"
bazel build -c opt //tools/strata:strata //base:libstrata_base.so //tests/attach:echo_server >&2
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
work="$(mktemp -d /tmp/strata-attach-bench.XXXXXX)"
"$bin/tests/attach/echo_server" --waiters >"$work/server" 2>&1 &
server=$!
perf_pid=""
cleanup() {
  [[ -n "$perf_pid" ]] && kill -INT "$perf_pid" 2>/dev/null
  kill "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
sleep 0.5
if [[ "${ATTACH_BENCH_SCHED:-1}" == 1 ]] && command -v perf >/dev/null && perf record -q -k CLOCK_MONOTONIC -e sched:sched_switch -a -o "$work/probe.data" true \
     >/dev/null 2>&1; then
  perf record -q -k CLOCK_MONOTONIC -e sched:sched_switch -e sched:sched_waking -a -o "$work/sched.data" \
    >/dev/null 2>"$work/perf.err" &
  perf_pid=$!
  sleep 1  # perf's start.
fi
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
python3 - "$bin/tools/strata/strata" "$server" "$rounds" "$work" "$bin/base/libstrata_base.so" \
  "${ATTACH_BENCH_COMPARE:-}" <<'EOF'
import json, re, subprocess, sys, time
strata, server, rounds, work, library, compare = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
binaries = [("this", strata)] + ([("compared", compare)] if compare else [])
line = re.compile(r"borrowed thread (\d+) .*sampling ([0-9.]+) ms after the command \(the borrowed "
                  r"thread's stop: ([0-9.]+) ms from its report")
with open(work + "/rounds.json", "w") as out:
    for i in range(rounds):
      for which, binary in (binaries if i % 2 == 0 else binaries[::-1]):
        profile = "%s/p%d.json" % (work, i)
        start_wall, start_monotonic = time.time(), time.monotonic()
        run = subprocess.run([binary, "record", "-p", server, "--duration", "0.2", "--lib", library, "-o", profile],
                             stderr=subprocess.PIPE, text=True)
        end_monotonic = time.monotonic()
        found = line.search(run.stderr)
        if run.returncode != 0 or not found:
            sys.exit("round %d: %s failed (%d): %s" % (i, binary, run.returncode, run.stderr[-400:]))
        data = json.load(open(profile))
        first = None
        for thread in data["threads"]:
            samples = thread["samples"]
            column = samples["schema"]["time"]
            for row in samples["data"]:
                first = row[column] if first is None else min(first, row[column])
        first_sample_ms = data["meta"]["startTime"] + first - start_wall * 1000 if first is not None else None
        json.dump({"which": which, "borrowed": int(found.group(1)), "sampling": float(found.group(2)),
                   "held": float(found.group(3)), "first_sample": first_sample_ms,
                   "start": start_monotonic, "end": end_monotonic}, out)
        out.write("\n")
        time.sleep(0.05)
EOF
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -n "$perf_pid" ]]; then
  kill -INT "$perf_pid"
  wait "$perf_pid" 2>/dev/null || true
  perf_pid=""
  perf script -i "$work/sched.data" -F tid,time,event,trace 2>/dev/null >"$work/sched.txt" || true
fi
python3 - "$work" "$server" <<'EOF'
import json, os, re, sys
work, server = sys.argv[1], sys.argv[2]
rounds = [json.loads(l) for l in open(work + "/rounds.json")]
program_tids = set(int(t) for t in os.listdir("/proc/%s/task" % server))
# The kernel's view: per round, every ptrace stop of a thread of the program (prev_state t).
sched = work + "/sched.txt"
if os.path.exists(sched) and os.path.getsize(sched) > 0:
    events = []  # (time, kind, tid)
    switch = re.compile(r"^\s*\d+\s+([0-9.]+):\s+sched:sched_switch:.*prev_pid=(\d+) .*prev_state=(\S+)")
    waking = re.compile(r"^\s*\d+\s+([0-9.]+):\s+sched:sched_waking:.*pid=(\d+) ")
    for text in open(sched):
        m = switch.match(text)
        if m and int(m.group(2)) in program_tids:
            events.append((float(m.group(1)), "t" if "t" in m.group(3) else "other", int(m.group(2))))
            continue
        m = waking.match(text)
        if m and int(m.group(2)) in program_tids:
            events.append((float(m.group(1)), "wake", int(m.group(2))))
    events.sort()
    for r in rounds:
        mine = [e for e in events if r["start"] <= e[0] <= r["end"]]
        first_stop, last_resume, stopped, in_stop = None, None, set(), set()
        for time_s, kind, tid in mine:
            if kind == "t":
                first_stop = time_s if first_stop is None else first_stop
                stopped.add(tid)
                in_stop.add(tid)
            elif kind == "wake" and tid in in_stop:
                last_resume = time_s
                in_stop.discard(tid)
        if first_stop is not None and last_resume is not None:
            r["window"] = (last_resume - first_stop) * 1000
            r["stopped"] = len(stopped)

def summary(name, values, unit="ms"):
    values = sorted(v for v in values if v is not None)
    if not values:
        return
    median = values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
    p90 = values[min(len(values) - 1, int(round(0.9 * (len(values) - 1))))]
    print("  %-13s median %7.2f %s, p90 %7.2f %s, max %7.2f %s (%d)" % (name, median, unit, p90, unit, values[-1], unit, len(values)))

first = rounds[0]
print("first attach (%s strata; loads the library): first sample %.1f ms, sampling %.1f ms, held %.2f ms%s" % (
    first["which"], first["first_sample"] or -1, first["sampling"], first["held"],
    ", stop window %.2f ms" % first["window"] if "window" in first else ""))
for which in sorted(set(r["which"] for r in rounds), reverse=True):
    later = [r for r in rounds[1:] if r["which"] == which]
    print("later attaches (%s strata):" % which)
    summary("first sample", [r["first_sample"] for r in later])
    summary("sampling", [r["sampling"] for r in later])
    summary("held", [r["held"] for r in later])
    if any("window" in r for r in later):
        summary("stop window", [r.get("window") for r in later])
        print("  threads of the program stopped per attach: %s" % sorted(set(r["stopped"] for r in later if "stopped" in r)))
    else:
        print("  stop window: not measured (ATTACH_BENCH_SCHED=0, or perf cannot record sched tracepoints here)")
EOF
