#!/usr/bin/env bash
# The deep function's share of the samples, Strata against `perf record -F 1000 -g`, on the same
# program (issue 34, "the handler's own cost"; docs/benchmarks.md "Deep stacks: the deep
# function's share"). tests/deep_recursion --rounds R --deep-percent P alternates the spin at the
# bottom of a DEPTH-deep recursion (deep_recurse, P % of the work) and the same spin 2 frames
# from main (shallow_entry); the program prints each side's CPU, measured with its own thread
# CPU clock. Variants, each run once per round in the same order:
#   plain      the program's own split (no profiler): the truth;
#   perf       perf record -F 1000 -g (frame pointers; a sample is counted for the side whose
#              function is in its call chain);
#   strata     preloaded libstrata_base.so at 1 kHz, default walker (libunwind with verified
#              frame-pointer steps), program built with frame pointers;
#   strata-fp  the frame-pointer walker (STRATA_STARTUP_FEATURES=framepointers);
#   strata-nofp the default walker on the program built without frame pointers
#              (deep_recursion_nofp: every frame a libunwind step, the slowest walk);
#   with STRATA_BEFORE_LIB=PATH also that library on the nofp program (e.g. one built before
#   the compensation).
# Strata's share counts the samples taken while the thread ran (CPU delta > 0), not the copies
# a preempted thread gets. Prints one "run" line per run and "median VARIANT share_pct=X
# cpu_share_pct=Y" per variant (Y: the split that run's program measured; in a profiled run it
# also holds the profiler's time on the deep side).
#
#   tools/bench/deep_share.sh [ROUNDS] [PERCENT] [DEPTH]       defaults: 5, 5, 1000
# Build first: bazel build -c opt //tests:deep_recursion //tests:deep_recursion_nofp
#   //tests:profile_stats //base:libstrata_base.so
set -uo pipefail
rounds="${1:-5}"
percent="${2:-5}"
depth="${3:-1000}"
bin="${STRATA_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/bazel-bin}"
library="$bin/base/libstrata_base.so"
args=(--depth "$depth" --iterations 1500000000 --rounds 20 --deep-percent "$percent")
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
variants=(plain strata strata-fp strata-nofp)
[[ -n "${STRATA_BEFORE_LIB:-}" ]] && variants+=(strata-before)
command -v perf >/dev/null && perf record -q -o "$out/probe.data" -- true >/dev/null 2>&1 && variants+=(perf)

# strata_share PROFILE: the deep side's share of the samples taken while the thread ran.
strata_share() {
  "$bin/tests/profile_stats" "$1" "GeckoMain:deep_recurse" "GeckoMain:shallow_entry" |
    awk '$1 == "match" { for (i = 2; i <= NF; i++) if ($i ~ /^real_count=/) n[$3] = substr($i, 12) }
         END { d = n["patterns=deep_recurse"]; s = n["patterns=shallow_entry"];
               if (d + s > 0) printf "%.2f", 100 * d / (d + s) }'
}
perf_share() {
  perf script -i "$1" -F ip,sym 2>/dev/null |
    awk 'BEGIN { RS = "" } /deep_recurse/ { d++; next } /shallow_entry/ { s++ }
         END { if (d + s > 0) printf "%.2f", 100 * d / (d + s) }'
}
for ((i = 0; i < rounds; i++)); do
  for variant in "${variants[@]}"; do
    program="$bin/tests/deep_recursion"
    [[ "$variant" == strata-nofp || "$variant" == strata-before ]] && program="$bin/tests/deep_recursion_nofp"
    rm -f "$out/p.json"
    case "$variant" in
      plain) "$program" "${args[@]}" >"$out/o" ;;
      strata) env LD_PRELOAD="$library" STRATA_STARTUP=1 STRATA_SHUTDOWN="$out/p.json" "$program" "${args[@]}" >"$out/o" ;;
      strata-fp) env LD_PRELOAD="$library" STRATA_STARTUP=1 STRATA_STARTUP_FEATURES=framepointers \
        STRATA_SHUTDOWN="$out/p.json" "$program" "${args[@]}" >"$out/o" ;;
      strata-nofp) env LD_PRELOAD="$library" STRATA_STARTUP=1 STRATA_SHUTDOWN="$out/p.json" \
        "$program" "${args[@]}" >"$out/o" ;;
      strata-before) env LD_PRELOAD="$STRATA_BEFORE_LIB" STRATA_STARTUP=1 STRATA_SHUTDOWN="$out/p.json" \
        "$program" "${args[@]}" >"$out/o" ;;
      perf) perf record -q -F 1000 -g -o "$out/perf.data" -- "$program" "${args[@]}" >"$out/o" 2>/dev/null ;;
    esac
    cpu=$(awk -F'[ =]' '/^deep_cpu_ns=/ { printf "%.2f", 100 * $2 / ($2 + $4) }' "$out/o")
    case "$variant" in
      plain) share="$cpu" ;;
      perf) share=$(perf_share "$out/perf.data") ;;
      *) share=$(strata_share "$out/p.json") ;;
    esac
    echo "run $variant share_pct=${share:-?} cpu_share_pct=${cpu:-?}" | tee -a "$out/runs"
  done
done
median() { awk -v v="$1" -v k="$2" '$2 == v { for (i = 3; i <= NF; i++) if (index($i, k "=") == 1) print substr($i, length(k) + 2) }' "$out/runs" |
  sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for variant in "${variants[@]}"; do
  echo "median $variant share_pct=$(median "$variant" share_pct) cpu_share_pct=$(median "$variant" cpu_share_pct)" \
    "depth=$depth deep_percent=$percent load=$(cut -d' ' -f1-3 /proc/loadavg)"
done
