#!/usr/bin/env bash
# The flight recorder's cost (docs/benchmarks.md, "Flight recorder"; issue 21): the same
# measures with and without STRATA_FLIGHT_RECORDER, in interleaved rounds (each round runs
# both variants in a random order), medians and the median of the per-round ratios:
#   - markers: base/base_benchmark's active marker benchmarks (ns per marker, pinned to one
#     CPU with taskset; the sampler thread inherits the pinning, so its publishing and
#     sealing are charged to the same CPU);
#   - sampling: tests/two_workers under the base tier (default mode): the two workers' own CPU
#     time and the work's wall time.
#   tools/bench/flight_recorder_bench.sh [ROUNDS]      (default 9; builds with -c opt)
# FLIGHT_DIR=DIR puts the files there (default: a temporary directory under /tmp).
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
ROUNDS="${1:-9}"
CPU="${BENCH_CPU:-1}"
b() { bazel --bazelrc=/work/wt/helper.bazelrc "$@"; }
if [[ ! -f /work/wt/helper.bazelrc ]]; then b() { bazel "$@"; }; fi
b build -c opt //base:base_benchmark //tests:two_workers_nofp //base:libstrata_base.so >&2 || exit 1
BIN="$(b info -c opt bazel-bin 2>/dev/null)"
WORK="$(mktemp -d /tmp/strata-flight-bench.XXXXXX)"
FLIGHT="${FLIGHT_DIR:-$WORK/flight}"
mkdir -p "$FLIGHT"
trap 'rm -rf "$WORK"' EXIT

markers() {  # VARIANT: appends "name ns" lines to $WORK/markers.VARIANT
  local -a env_flight=()
  [[ $1 == flight ]] && env_flight=(STRATA_FLIGHT_RECORDER="$FLIGHT")
  env "${env_flight[@]}" taskset -c "$CPU" "$BIN/base/base_benchmark" \
    --benchmark_filter='BM_Marker(UntypedInstant|UntypedInterval|TypedThreeFields)$' \
    --benchmark_min_time=0.5 --benchmark_format=csv 2>/dev/null |
    awk -F, '/^"BM_/ { gsub(/"/, "", $1); print $1, $3, $4 }' >>"$WORK/markers.$1"
  rm -f "$FLIGHT"/*.flight
}
sampling() {  # VARIANT: appends "cpu_ms wall_ms" to $WORK/sampling.VARIANT
  local -a env_flight=()
  [[ $1 == flight ]] && env_flight=(STRATA_FLIGHT_RECORDER="$FLIGHT")
  env "${env_flight[@]}" LD_PRELOAD="$BIN/base/libstrata_base.so" STRATA_STARTUP=1 \
    STRATA_SHUTDOWN="$WORK/p.json" "$BIN/tests/two_workers_nofp" --iterations 22000000 >"$WORK/out" 2>&1
  awk '/^two_workers: thread=/ { for (i = 1; i <= NF; ++i) {
         if ($i ~ /^cpu_ms=/) c += substr($i, 8)
         if ($i ~ /^wall_ms=/) { v = substr($i, 9) + 0; if (v > w) w = v } } }
       END { print c, w }' "$WORK/out" >>"$WORK/sampling.$1"
  rm -f "$FLIGHT"/*.flight
}

for ((r = 1; r <= ROUNDS; ++r)); do
  if ((RANDOM % 2)); then order=(plain flight); else order=(flight plain); fi
  for v in "${order[@]}"; do markers "$v"; sampling "$v"; done
  echo "round $r done (${order[*]})" >&2
done

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo "| measure | plain (median) | flight recorder (median) | ratio of medians | median of per-round ratios |"
echo "|---|---|---|---|---|"
# Column 2: wall time per marker (the pinned CPU is shared with the sampler thread, so its
# publishing and sealing count); column 3: the recording thread's own CPU time per marker.
for name in BM_MarkerUntypedInstant BM_MarkerUntypedInterval BM_MarkerTypedThreeFields; do
  for col in 2 3; do
    what=$([[ $col == 2 ]] && echo "wall" || echo "thread CPU")
    p=$(awk -v n="$name" -v c="$col" '$1 == n { print $c }' "$WORK/markers.plain" | median)
    f=$(awk -v n="$name" -v c="$col" '$1 == n { print $c }' "$WORK/markers.flight" | median)
    paired=$(paste <(awk -v n="$name" -v c="$col" '$1 == n { print $c }' "$WORK/markers.plain") \
                   <(awk -v n="$name" -v c="$col" '$1 == n { print $c }' "$WORK/markers.flight") |
             awk '{ print $2 / $1 }' | median)
    printf '| %s ns/marker (%s) | %.2f | %.2f | %.3f | %.3f |\n' "$name" "$what" "$p" "$f" \
      "$(awk -v a="$f" -v b="$p" 'BEGIN { print a / b }')" "$paired"
  done
done
for col in 1 2; do
  what=$([[ $col == 1 ]] && echo "two_workers CPU ms (workers)" || echo "two_workers wall ms")
  p=$(awk -v c="$col" '{ print $c }' "$WORK/sampling.plain" | median)
  f=$(awk -v c="$col" '{ print $c }' "$WORK/sampling.flight" | median)
  paired=$(paste <(awk -v c="$col" '{ print $c }' "$WORK/sampling.plain") <(awk -v c="$col" '{ print $c }' "$WORK/sampling.flight") |
           awk '{ print $2 / $1 }' | median)
  printf '| %s | %.1f | %.1f | %.3f | %.3f |\n' "$what" "$p" "$f" "$(awk -v a="$f" -v b="$p" 'BEGIN { print a / b }')" "$paired"
done
echo "rounds=$ROUNDS load: $(cut -d' ' -f1-3 /proc/loadavg)"
