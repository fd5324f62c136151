#!/usr/bin/env bash
# The attach worker's own path to sampling (issue 36): ROUNDS first attaches, each to a fresh
# `tests/attach/echo_server --waiters` (5 threads), traced system-wide with `perf trace -a -e
# clone3,ioctl` (root): from the borrowed thread's clone3 that creates the attach worker to
# the worker's first and last PERF_EVENT_IOC_ENABLE (every listed thread's sampling source
# armed). What lies between is Strata's in the process: the registrations, the session's
# start (libunwind, the sampling signal, the sources) and whatever it waits for; not strata's
# exec, the borrowed thread's stop, nor the busy thread's first interval of CPU, which
# tools/attach_first_bench.sh's "first sample" adds. Medians and 90th percentiles, ms.
#   tools/attach_arm_bench.sh [ROUNDS]                      (default 10; builds with -c opt)
#   ATTACH_BENCH_COMPARE=/path/to/other/strata tools/attach_arm_bench.sh
#       each round also attaches that strata (with the libstrata_base.so beside it) to a fresh
#       process of its own, the order alternating.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-10}"
command -v perf >/dev/null || { echo "attach_arm_bench: needs perf (linux-perf) and root" >&2; exit 2; }
bazel build -c opt //tools/strata:strata //base:libstrata_base.so //tests/attach:echo_server >&2
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
work="$(mktemp -d /tmp/strata-attach-arm.XXXXXX)"
trap 'rm -rf "$work"' EXIT
binaries=("this:$bin/tools/strata/strata:$bin/base/libstrata_base.so")
if [[ -n "${ATTACH_BENCH_COMPARE:-}" ]]; then
  binaries+=("compared:$ATTACH_BENCH_COMPARE:$(dirname "$ATTACH_BENCH_COMPARE")/libstrata_base.so")
fi
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
for ((i = 0; i < rounds; i++)); do
  order=("${binaries[@]}")
  if ((i % 2 == 1 && ${#binaries[@]} == 2)); then order=("${binaries[1]}" "${binaries[0]}"); fi
  for entry in "${order[@]}"; do
    IFS=: read -r which strata library <<<"$entry"
    "$bin/tests/attach/echo_server" --waiters >"$work/server.out" 2>&1 &
    server=$!
    sleep 0.4
    timeout 6 perf trace -a -e clone3,ioctl -o "$work/trace.txt" 2>/dev/null &
    tracer=$!
    sleep 2.5  # perf trace is recording by then, even on a loaded machine
    "$strata" record -q -p "$server" --duration 0.1 --lib "$library" -o "$work/p.json" 2>/dev/null || true
    kill "$server"; wait "$server" 2>/dev/null || true
    wait "$tracer" 2>/dev/null || true
    python3 - "$server" "$work/trace.txt" "$which" >>"$work/rows" <<'PYEOF'
import re, sys
server, path, which = sys.argv[1:4]
t0 = worker = None
enables = []
for line in open(path):
    m = re.match(r"\s*([0-9.]+) .*/%s clone3.*= (\d+)" % server, line)
    if m and worker is None:
        t0, worker = float(m.group(1)), m.group(2)
        continue
    if worker and re.search(r"/%s ioctl.*PERF_ENABLE" % worker, line):
        enables.append(float(line.split()[0]))
if enables:
    print(which, "%.2f" % (enables[0] - t0), "%.2f" % (enables[-1] - t0), len(enables))
PYEOF
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/rows" <<'PYEOF'
import sys
rows = [line.split() for line in open(sys.argv[1])]
for which in ("this", "compared"):
    for column, name in ((1, "first source armed"), (2, "all armed")):
        values = sorted(float(r[column]) for r in rows if r[0] == which)
        if not values:
            continue
        n = len(values)
        median = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
        p90 = values[min(n - 1, int(round(0.9 * (n - 1))))]
        print("%-8s worker created -> %-18s median %6.2f ms, p90 %6.2f ms, max %6.2f ms (%d)" % (which, name, median, p90, values[-1], n))
PYEOF
