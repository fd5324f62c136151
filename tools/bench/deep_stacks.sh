#!/usr/bin/env bash
# Cost of sampling deep native stacks (issue 38; docs/benchmarks.md, "Deep stacks"):
# tests/deep_recursion spinning at the bottom of a DEPTH-deep recursion (built with frame
# pointers), run plain, preloaded with libstrata_base.so at 1 kHz (STRATA_STARTUP=1; the
# default walker, libunwind with verified frame-pointer steps), preloaded with the
# frame-pointer walker (STRATA_STARTUP_FEATURES=framepointers), and under
# `perf record -F 1000 -g` when perf is installed; with STRATA_BEFORE_LIB=PATH also that
# library (e.g. one built before issue 38); with STRATA_FLOOR_LIB=PATH (libsignal_floor.so) also
# the floor of Strata's default source: an empty handler signalled by a perf task-clock event
# on the main thread at 1 kHz (floor-perf), and the same with a thread waking every 4 ms as
# Strata's sampler does (floor-perf-waker). Interleaved rounds, each variant once per round in
# the same order; the program's CPU time (user + system, /usr/bin/time) per run, then the
# medians and each variant's overhead against plain.
#
#   tools/bench/deep_stacks.sh [ROUNDS] [DEPTH] [ITERATIONS]    defaults: 7, 1000, 1500000000
# Build first: bazel build -c opt //tests:deep_recursion //base:libstrata_base.so
# Output: one "run VARIANT cpu_s=X" line per run, then "median VARIANT cpu_s=X overhead_pct=Y".
set -uo pipefail
rounds="${1:-7}"
depth="${2:-1000}"
iterations="${3:-1500000000}"
bin="${STRATA_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/bazel-bin}"
program="$bin/tests/deep_recursion"
library="$bin/base/libstrata_base.so"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
variants=(plain strata strata-fp)
[[ -n "${STRATA_BEFORE_LIB:-}" ]] && variants+=(strata-before)
[[ -n "${STRATA_FLOOR_LIB:-}" ]] && variants+=(floor-perf floor-perf-waker)
command -v perf >/dev/null && perf record -q -o "$out/probe.data" -- true >/dev/null 2>&1 && variants+=(perf)
cpu_of() { awk '{ printf "%.3f", $1 + $2 }' "$out/time"; }
for ((i = 0; i < rounds; i++)); do
  for variant in "${variants[@]}"; do
    timed=(/usr/bin/time -o "$out/time" -f "%U %S" "$program" --depth "$depth" --iterations "$iterations")
    case "$variant" in
      plain) "${timed[@]}" >/dev/null ;;
      strata) env LD_PRELOAD="$library" STRATA_STARTUP=1 STRATA_SHUTDOWN="$out/p.json" "${timed[@]}" >/dev/null ;;
      strata-fp) env LD_PRELOAD="$library" STRATA_STARTUP=1 STRATA_STARTUP_FEATURES=framepointers \
        STRATA_SHUTDOWN="$out/p.json" "${timed[@]}" >/dev/null ;;
      strata-before) env LD_PRELOAD="$STRATA_BEFORE_LIB" STRATA_STARTUP=1 STRATA_SHUTDOWN="$out/p.json" \
        "${timed[@]}" >/dev/null ;;
      floor-perf*)
        floor_env=(LD_PRELOAD="$STRATA_FLOOR_LIB" SIGNAL_FLOOR_HZ=1000 SIGNAL_FLOOR_MAIN=1 SIGNAL_FLOOR_SOURCE=perf)
        [[ $variant == floor-perf-waker ]] && floor_env+=(SIGNAL_FLOOR_WAKER=1 SIGNAL_FLOOR_WAKER_HZ=250)
        env "${floor_env[@]}" "${timed[@]}" >/dev/null 2>&1 ;;
      perf) perf record -q -F 1000 -g -o "$out/perf.data" -- "${timed[@]}" >/dev/null 2>&1 ;;
    esac
    echo "run $variant cpu_s=$(cpu_of)" | tee -a "$out/runs"
  done
done
median() { awk -v v="$1" '$2 == v { sub("cpu_s=", "", $3); print $3 }' "$out/runs" | sort -g |
  awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
plain=$(median plain)
for variant in "${variants[@]}"; do
  m=$(median "$variant")
  awk -v v="$variant" -v m="$m" -v p="$plain" -v d="$depth" -v l="$(cut -d' ' -f1-3 /proc/loadavg)" \
    'BEGIN { printf "median %s cpu_s=%.3f overhead_pct=%+.1f depth=%d load=%s\n", v, m, 100 * (m - p) / p, d, l }'
done
