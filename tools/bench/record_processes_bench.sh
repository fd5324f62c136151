#!/usr/bin/env bash
# `strata record` of a process-heavy script (issue 38; docs/benchmarks.md, "strata record of
# many short processes"): a shell loop that starts PROCESSES `/bin/true`s one after the
# other, run in interleaved rounds (each round runs every variant once, in a random order),
# medians of the wall time:
#   plain              the script alone
#   preloaded          LD_PRELOAD=libstrata_base.so STRATA_STARTUP=1 STRATA_SHUTDOWN=DIR/%p.json
#                      (each process's profile saved, nothing merged; DIR in $TMPDIR or /tmp)
#   record             strata record -o FILE -- script
#   record_nofr        strata record --no-flight-recorder -o FILE -- script
#   perf               perf record -g -F 1000 -o FILE -- script (when perf is installed)
#   [before_record ...] the same with another build's strata (BEFORE_BIN=DIR, a bazel-bin):
#                      before/after in the same rounds
# and the merge rate, from record's own "run X s, merge Y s" line (processes merged per second).
#
#   tools/bench/record_processes_bench.sh [ROUNDS [PROCESSES]]   (default 5 rounds, 1000)
# STRATA_BIN=DIR (a bazel-bin with tools/strata/strata, libstrata_record.so and
# base/libstrata_base.so) skips the build (-c opt otherwise). Prints "RESULT" lines and a
# markdown table; RECORD_BENCH_TABLE_OUT=FILE also writes the table there.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
ROUNDS="${1:-5}"
PROCESSES="${2:-1000}"
if [[ -z "${STRATA_BIN:-}" ]]; then
  bazel build -c opt //tools/strata:strata //tools/strata:libstrata_record.so //base:libstrata_base.so >&2 || exit 1
  STRATA_BIN="$(bazel info -c opt bazel-bin 2>/dev/null)"
fi
BEFORE_BIN="${BEFORE_BIN:-}"
WORK="$(mktemp -d /tmp/strata-record-bench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
unset STRATA_STARTUP STRATA_SHUTDOWN STRATA_STARTUP_FEATURES STRATA_STARTUP_INTERVAL \
  STRATA_STARTUP_BUFFER_MB STRATA_STARTUP_FILTERS STRATA_LOGGING STRATA_FLIGHT_RECORDER LD_PRELOAD

cat >"$WORK/many.sh" <<'EOF'
#!/bin/sh
i=0
while [ "$i" -lt "$1" ]; do /bin/true; i=$((i + 1)); done
EOF
chmod +x "$WORK/many.sh"

variants=(plain preloaded record record_nofr)
command -v perf >/dev/null && perf record -q -o "$WORK/probe.data" -- true 2>/dev/null && variants+=(perf)
[[ -n "$BEFORE_BIN" ]] && variants+=(before_record before_record_nofr)

# run VARIANT: appends the wall time (s) to $WORK/wall.VARIANT, the merge time (s) to
# $WORK/merge.VARIANT for the record variants.
run() {
  local variant="$1" out="$WORK/out.$1" log="$WORK/log.$1" cmd=()
  rm -rf "$out"; mkdir -p "$out"
  case "$variant" in
    plain) cmd=(env) ;;
    preloaded) cmd=(env LD_PRELOAD="$STRATA_BIN/base/libstrata_base.so" STRATA_STARTUP=1 STRATA_SHUTDOWN="$out/%p.json") ;;
    record) cmd=("$STRATA_BIN/tools/strata/strata" record -o "$out/r.json" --) ;;
    record_nofr) cmd=("$STRATA_BIN/tools/strata/strata" record --no-flight-recorder -o "$out/r.json" --) ;;
    before_record) cmd=("$BEFORE_BIN/tools/strata/strata" record -o "$out/r.json" --) ;;
    before_record_nofr) cmd=("$BEFORE_BIN/tools/strata/strata" record --no-flight-recorder -o "$out/r.json" --) ;;
    perf) cmd=(perf record -q -g -F 1000 -o "$out/perf.data" --) ;;
  esac
  local start end
  start=$(date +%s.%N)
  "${cmd[@]}" "$WORK/many.sh" "$PROCESSES" >/dev/null 2>"$log"
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.4f\n", b - a }' >>"$WORK/wall.$variant"
  awk '/strata record: run .* merge / { for (i = 1; i <= NF; ++i) if ($i == "merge") { print $(i + 1); exit } }' \
    "$log" >>"$WORK/merge.$variant"
  rm -rf "$out"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  for variant in $(printf '%s\n' "${variants[@]}" | shuf); do run "$variant"; done
  echo "round $round of $ROUNDS done" >&2
done
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

plain=$(median <"$WORK/wall.plain")
perf_wall=""
[[ -f "$WORK/wall.perf" ]] && perf_wall=$(median <"$WORK/wall.perf")
{
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load average at start $load_start, at end $load_end; $ROUNDS interleaved rounds of a script starting $PROCESSES /bin/true one after the other; medians."
  echo
  echo "| variant | wall s (median) | × plain | × perf record | per process above plain, ms | merge s (median) | processes merged per s |"
  echo "|---|---|---|---|---|---|---|"
  for variant in "${variants[@]}"; do
    wall=$(median <"$WORK/wall.$variant")
    merge=$(median <"$WORK/merge.$variant")
    vs_perf="—"
    [[ -n "$perf_wall" ]] && vs_perf=$(awk -v a="$wall" -v b="$perf_wall" 'BEGIN { printf "%.2f", a / b }')
    rate="—"
    [[ -n "$merge" ]] && rate=$(awk -v m="$merge" -v n="$PROCESSES" 'BEGIN { if (m > 0) printf "%.0f", (n + 1) / m; else print "> " (n + 1) / 0.005 }')
    echo "| $variant | $wall | $(awk -v a="$wall" -v b="$plain" 'BEGIN { printf "%.2f", a / b }') | $vs_perf | $(awk -v a="$wall" -v b="$plain" -v n="$PROCESSES" 'BEGIN { printf "%.2f", 1000 * (a - b) / n }') | ${merge:-—} | $rate |"
    echo "RESULT variant=$variant wall_s=$wall merge_s=${merge:-} all=[$(tr '\n' ' ' <"$WORK/wall.$variant")]" >&2
  done
} >"$WORK/table.md"
cat "$WORK/table.md"
[[ -n "${RECORD_BENCH_TABLE_OUT:-}" ]] && cp "$WORK/table.md" "$RECORD_BENCH_TABLE_OUT"
exit 0
