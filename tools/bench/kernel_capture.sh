#!/usr/bin/env bash
# Kernel-side stack capture against the in-process signal handler (issue 38; docs/benchmarks.md,
# "Kernel-side capture against the signal handler"): tools/bench/kernel_capture_probe's
# workers (frame pointers, a recursion of DEPTH, fixed work at its bottom) at HZ samples per
# second of each worker's CPU, run
#   plain    unprofiled (--capture none)
#   floor    preloaded with libsignal_floor.so (per-thread timers, an empty handler)
#   strata   preloaded with libstrata_base.so (STRATA_STARTUP=1, interval 1/HZ: the default
#            source, a perf task-clock event per thread that signals it; today's handler)
#   kernel   --capture kernel: perf events copy ip/sp/bp and the top STACK bytes of the
#            stack, a reader thread unwinds the copies every 4 ms (no signal)
#   perf     perf record -e cpu-clock -F HZ -g (perf's own kernel-side call chains)
# in interleaved rounds (each variant once per round, same order). Per variant, medians of the
# workers' own CPU time (their thread clocks, interrupts and copies included) and of the
# process's CPU time; the cost per sample is (median workers' CPU - plain's) / the median
# number of the workers' samples (floor: signals handled; strata: samples with CPU in the
# profile; kernel: records read; perf: its samples of the workers).
#
#   tools/bench/kernel_capture.sh [ROUNDS] [DEPTH] [HZ] [ITERATIONS]   defaults: 5 10 4000 300000000
# Build first: bazel build -c opt //tools/bench:kernel_capture_probe //tools/bench:libsignal_floor.so
#   //base:libstrata_base.so
# Output: one "run ..." line per run, then "median VARIANT worker_cpu_ms=.. process_cpu_ms=..
# samples=.. us_per_sample=.. overhead_pct=..".
set -uo pipefail
rounds="${1:-5}"
depth="${2:-10}"
hz="${3:-4000}"
iterations="${4:-300000000}"
bin="${STRATA_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/bazel-bin}"
probe="$bin/tools/bench/kernel_capture_probe"
floor_lib="$bin/tools/bench/libsignal_floor.so"
strata_lib="$bin/base/libstrata_base.so"
# Deep stacks need a larger copy (the kernel caps it below 64 KiB).
stack=$((depth > 200 ? 60000 : 16384))
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
variants=(plain floor strata kernel)
command -v perf >/dev/null && perf record -q -o "$out/probe.data" -- true >/dev/null 2>&1 && variants+=(perf)
# KERNEL_CAPTURE_VARIANTS="plain floor strata ..." picks others, among the above and
#   floor-perf      the floor's empty handler signalled by a perf task-clock event per thread
#                   (SIGNAL_FLOOR_SOURCE=perf: the source of Strata's default mode)
#   floor-perf-waker  the same with a thread waking every 4 ms, as Strata's sampler does
#   strata-nowalk   Strata without the stack walk (STRATA_STARTUP_FEATURES=-stackwalk)
#   strata-timer    Strata in precise mode: per-thread CLOCK_MONOTONIC timers, the floor's source
#   strata-before   the library STRATA_BEFORE_LIB=PATH (an earlier build), as strata
[[ -n "${KERNEL_CAPTURE_VARIANTS:-}" ]] && read -r -a variants <<<"$KERNEL_CAPTURE_VARIANTS"
interval_ms=$(awk -v hz="$hz" 'BEGIN { printf "%g", 1000 / hz }')
args=(--depth "$depth" --iterations "$iterations" --hz "$hz" --stack "$stack")
field() { sed -n "s/.*[ :]$1=\([0-9.]*\).*/\1/p" "$2" | head -1; }
strata_samples() {  # samples with CPU of the probe's workers in the profile
  python3 - "$1" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
n = 0
for t in p["threads"]:
    if not t["name"].startswith("probe-"):
        continue
    s = t["samples"]
    i = s["schema"]["threadCPUDelta"]
    n += sum(1 for row in s["data"] if row[i])
print(n)
PY
}
for ((r = 0; r < rounds; r++)); do
  for v in "${variants[@]}"; do
    rm -f "$out/p.json"
    case "$v" in
      plain) "$probe" "${args[@]}" >"$out/o" 2>&1 ;;
      floor) env LD_PRELOAD="$floor_lib" SIGNAL_FLOOR_HZ="$hz" "$probe" "${args[@]}" >"$out/o" 2>&1 ;;
      floor-perf) env LD_PRELOAD="$floor_lib" SIGNAL_FLOOR_HZ="$hz" SIGNAL_FLOOR_SOURCE=perf \
        "$probe" "${args[@]}" >"$out/o" 2>&1 ;;
      floor-perf-waker) env LD_PRELOAD="$floor_lib" SIGNAL_FLOOR_HZ="$hz" SIGNAL_FLOOR_SOURCE=perf \
        SIGNAL_FLOOR_WAKER=1 SIGNAL_FLOOR_WAKER_HZ=250 "$probe" "${args[@]}" >"$out/o" 2>&1 ;;
      strata*)
        lib="$strata_lib" features=""
        case "$v" in
          strata-nowalk) features=-stackwalk ;;
          strata-timer) features=precise ;;
          strata-before) lib="$STRATA_BEFORE_LIB" ;;
        esac
        env LD_PRELOAD="$lib" STRATA_STARTUP=1 STRATA_STARTUP_INTERVAL="$interval_ms" \
          ${features:+STRATA_STARTUP_FEATURES="$features"} STRATA_SHUTDOWN="$out/p.json" \
          "$probe" "${args[@]}" >"$out/o" 2>&1 ;;
      kernel) "$probe" "${args[@]}" --capture kernel >"$out/o" 2>&1 ;;
      perf) perf record -q -e cpu-clock -F "$hz" -g -o "$out/perf.data" -- "$probe" "${args[@]}" >"$out/o" 2>&1 ;;
    esac
    case "$v" in
      plain) samples=0 ;;
      floor*) samples=$(field signals "$out/o") ;;
      strata*) samples=$(strata_samples "$out/p.json") ;;
      kernel) samples=$(field samples "$out/o") ;;
      perf) samples=$(perf script -i "$out/perf.data" -F comm 2>/dev/null | grep -c '^ *probe-') ;;
    esac
    echo "run $v worker_cpu_ms=$(field worker_cpu_ms "$out/o") process_cpu_ms=$(field process_cpu_ms "$out/o") samples=$samples" |
      tee -a "$out/runs"
  done
done
median() {  # VARIANT KEY
  awk -v v="$1" -v k="$2=" '$2 == v { for (i = 3; i <= NF; ++i) if (index($i, k) == 1) print substr($i, length(k) + 1) }' "$out/runs" |
    sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
plain=$(median plain worker_cpu_ms)
plain_process=$(median plain process_cpu_ms)
for v in "${variants[@]}"; do
  awk -v v="$v" -v w="$(median "$v" worker_cpu_ms)" -v p="$(median "$v" process_cpu_ms)" \
    -v s="$(median "$v" samples)" -v base="$plain" -v base_p="$plain_process" -v d="$depth" -v hz="$hz" \
    -v l="$(cut -d' ' -f1-3 /proc/loadavg)" 'BEGIN {
      per = s > 0 ? sprintf("%.1f", 1000 * (w - base) / s) : "-";
      per_p = s > 0 ? sprintf("%.1f", 1000 * (p - base_p) / s) : "-";
      printf "median %s worker_cpu_ms=%.1f process_cpu_ms=%.1f samples=%d us_per_sample=%s process_us_per_sample=%s overhead_pct=%+.1f depth=%d hz=%d load=%s\n",
        v, w, p, s, per, per_p, 100 * (w - base) / base, d, hz, l }'
done
