#!/usr/bin/env bash
# First attach cost (issue 36): ROUNDS times, a fresh target process (never attached, so that
# dlopen maps and relocates libstrata_base.so and the session starts for the first time in it)
# and one `strata record -p PID --duration 0.2`, measured from just before strata is started
# (its exec included) to the first sample of the profile it writes, as tools/attach_bench.sh
# does for later attaches; and where that time went, from the line strata prints:
#   strata start  exec of strata to its attach code (measured apart: a `strata record -p 0`
#                 usage error, exec to exit, run before each round)
#   borrow        strata's checks, symbols, the library's pages, until the borrowed thread stopped
#   loaded        ... until dlopen and strata_attach_start returned (the borrowed thread's stop)
#   sampling      ... until the worker in the process said the session runs
#   first sample  the earliest sample (the spinner's, one interval of its CPU time later)
# Medians, 90th percentiles and maxima.
#   tools/attach_first_bench.sh [ROUNDS]                 (default 20; builds with -c opt)
#   ATTACH_BENCH_TARGET=c tools/attach_first_bench.sh     (tests/attach/c_waiters: a C program)
#   ATTACH_BENCH_COMPARE=/path/to/other/strata tools/attach_first_bench.sh
#       each round also attaches that strata (with the libstrata_base.so beside it: another
#       build's) to a fresh process of its own, the order alternating: before/after side by side
#   ATTACH_BENCH_VERBOSE=1: every round's figures too
# Beside a busy machine: tools/load.sh --seconds 600 & ... tools/attach_first_bench.sh; kill %1
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-20}"
target="${ATTACH_BENCH_TARGET:-cxx}"
bazel build -c opt //tools/strata:strata //base:libstrata_base.so //tests/attach:echo_server \
  //tests/attach:c_waiters >&2
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
strata="$bin/tools/strata/strata"
library="$bin/base/libstrata_base.so"
if [[ "$target" == c ]]; then program=("$bin/tests/attach/c_waiters"); else program=("$bin/tests/attach/echo_server" --waiters); fi
work="$(mktemp -d /tmp/strata-attach-first.XXXXXX)"
trap 'rm -rf "$work"' EXIT
echo "target: ${program[*]}; load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
python3 - "$strata" "$library" "$rounds" "$work" "${ATTACH_BENCH_COMPARE:-}" "${program[@]}" <<'PYEOF'
import json, os, re, subprocess, sys, time
strata, library, rounds, work, compare, program = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6:]
binaries = [("this", strata, library)]
if compare:
    binaries.append(("compared", compare, os.path.join(os.path.dirname(compare), "libstrata_base.so")))
line = re.compile(r"borrowed thread \d+ after ([0-9.]+) ms.*?loaded ([0-9.]+) ms and sampling ([0-9.]+) ms after the "
                  r"command \(the borrowed thread's stop: ([0-9.]+) ms from its report; prepare [0-9.]+ \+ load ([0-9.]+)")
rows = []
for i in range(rounds):
  for which, binary, lib in (binaries if i % 2 == 0 else binaries[::-1]):
    started = time.monotonic()
    subprocess.run([binary, "record", "-p", "0", "-o", work + "/unused.json"], stderr=subprocess.DEVNULL)
    strata_start = (time.monotonic() - started) * 1000
    server = subprocess.Popen(program, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    server.stdout.readline()  # "port N" / "ready": its threads are started.
    time.sleep(0.3)
    profile = "%s/p%d.json" % (work, i)
    start_wall = time.time()
    run = subprocess.run([binary, "record", "-p", str(server.pid), "--duration", "0.2", "--lib", lib, "-o", profile],
                         stderr=subprocess.PIPE, text=True)
    server.kill()
    server.wait()
    found = line.search(run.stderr)
    if run.returncode != 0 or not found:
        sys.exit("round %d failed (%d): %s" % (i, run.returncode, run.stderr[-600:]))
    data = json.load(open(profile))
    first = None
    for thread in data["threads"]:
        column = thread["samples"]["schema"]["time"]
        for row in thread["samples"]["data"]:
            first = row[column] if first is None else min(first, row[column])
    rows.append({"which": which, "strata start": strata_start, "borrow": float(found.group(1)),
                 "loaded": float(found.group(2)), "sampling": float(found.group(3)), "held": float(found.group(4)),
                 "dlopen+start": float(found.group(5)),
                 "first sample": data["meta"]["startTime"] + first - start_wall * 1000 if first is not None else None})
    time.sleep(0.1)

def summary(subset, name):
    values = sorted(r[name] for r in subset if r[name] is not None)
    n = len(values)
    median = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
    p90 = values[min(n - 1, int(round(0.9 * (n - 1))))]
    print("  %-13s median %7.2f ms, p90 %7.2f ms, max %7.2f ms (%d)" % (name, median, p90, values[-1], n))

for which, binary, lib in binaries:
    subset = [r for r in rows if r["which"] == which]
    if os.environ.get("ATTACH_BENCH_VERBOSE") == "1":
        for r in subset:
            print("  round: " + ", ".join("%s %.1f" % (k, v) for k, v in r.items() if isinstance(v, float)))
    print("first attaches, a fresh process each (%s strata: %s):" % (which, binary))
    for name in ("strata start", "borrow", "loaded", "sampling", "first sample", "held", "dlopen+start"):
        summary(subset, name)
PYEOF
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
