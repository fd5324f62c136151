#!/usr/bin/env bash
# Issue 9's benchmark command: every comparison in one go, printed as ONE table
#   measure | Strata | peer or floor | ratio | target | met?
# (docs/benchmarks.md, "Issue 9 summary table", explains each row and how to read it).
#
#   tools/bench.sh
#
# It runs tools/setup.sh, installs the measuring tools it needs (Debian: linux-perf,
# hyperfine, valgrind, libgoogle-perftools-dev), builds with -c opt, then:
#   1. hot-path micro-benchmarks (Google Benchmark, pinned to one CPU with taskset,
#      BENCH_REPETITIONS repetitions, medians): labels, markers, buffer vs memcpy;
#   2. callgrind instruction counts of the same label and marker fast paths;
#   3. whole-program comparisons, BENCH_ROUNDS rounds, each round running every variant once in
#      a random order, medians: tests/two_workers (2 busy threads) and tools/bench/busy_threads
#      (16) unprofiled, under Strata (default and precise mode), gperftools and `perf record`;
#      slowdowns from the medians of the work's wall time and of its CPU time (the workers'
#      own CPU time; busy_threads: the process's); "met" is judged on CPU time, which other
#      work on a shared machine disturbs far less than wall time; beside precise mode, the
#      in-process signal floor (tools/bench/libsignal_floor.so: the same per-thread
#      CLOCK_MONOTONIC timers with an empty handler, or one that reads the TSC and writes 100
#      bytes; and with Strata's extra wake-ups: the main thread's timer and a thread waking
#      every interval) and the CPU cost per sample of Strata, the floor and perf;
#   4. profile writing (tools/bench/profile_write_bench, 1 M samples + 1 M markers);
#   5. preloaded-but-inactive start-up (hyperfine), library size and NEEDED entries;
#   6. the largest sample gap across takeover (tests/takeover programs and checker);
#   7. deep stacks: walk cost per frame (sampling_benchmark) and the CPU cost of sampling a
#      1 000-frame recursion (tools/bench/deep_stacks.sh), and the recursion's share of the
#      samples against perf's when it takes 5 % of the CPU (tools/bench/deep_share.sh).
#   8. `strata record` of a script starting BENCH_RECORD_PROCESSES short processes against plain
#      and `perf record` (tools/bench/record_processes_bench.sh).
#   9. native allocations: the hooks' unsampled path, and the feature's cost on an
#      allocation-heavy program and on g++, beside gperftools' heap profiler and heaptrack
#      (tools/bench_native_allocations.sh).
#  10. symbolication speed: addresses per second of `strata symbolicate` against
#      `llvm-symbolizer --inlining` on the same profile's addresses
#      (tools/bench/symbolicate_speed.sh).
# Environment:
#   BENCH_ROUNDS=5         whole-program rounds        BENCH_REPETITIONS=5  micro-benchmark reps
#   BENCH_CPU=1            the CPU the micro-benchmarks are pinned to
#   BENCH_RECORD_PROCESSES=1000  processes the record benchmark's script starts
#   BENCH_TABLE_OUT=FILE   also write the table (markdown) and machine facts to FILE
#   STRATA_BAZEL_OUTPUT_BASE=DIR   build in this Bazel output base, without convenience links
#                                  (for a checkout shared by several builds)
# Exit status: 0 when the table was printed (whether or not every target is met; rows whose
# programs did not build show n/a), 1 when set-up failed.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"

ROUNDS="${BENCH_ROUNDS:-5}"
REPS="${BENCH_REPETITIONS:-5}"
PIN_CPU="${BENCH_CPU:-1}"
BENCH_RECORD_PROCESSES="${BENCH_RECORD_PROCESSES:-1000}"
WORK="$(mktemp -d /tmp/strata-bench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
log() { echo "bench: $*" >&2; }

# --- 0. Set-up: the project's packages, then the measuring tools.
tools/setup.sh >&2 || { log "tools/setup.sh failed"; exit 1; }
BENCH_PACKAGES=(linux-perf hyperfine valgrind libgoogle-perftools-dev)
missing=()
for pkg in "${BENCH_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]} > 0)); then
  log "installing missing Debian packages: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
    $SUDO apt-get update >&2
    $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
      { log "cannot install ${missing[*]}"; exit 1; }
  fi
fi

# --- Build.
bazel_cmd=(bazel)
build_flags=(-c opt)
if [[ -n "${STRATA_BAZEL_OUTPUT_BASE:-}" ]]; then
  bazel_cmd+=("--output_base=$STRATA_BAZEL_OUTPUT_BASE")
  build_flags+=(--symlink_prefix=/)
fi
[[ "${CI:-}" == "true" ]] && build_flags+=(--config=ci)
TARGETS=(
  //base:base_benchmark //shared/buffer:buffer_benchmark
  //base:libstrata_base.so //full:libstrata_full.so
  //tests:two_workers_nofp //tests:profile_stats //tests:gperf_count
  //tests/takeover:takeover_dlopen //tests/takeover:takeover_linked //tests/takeover:takeover_check
  //tools/bench:profile_write_bench //tools/bench:callgrind_driver //tools/bench:busy_threads
  //tools/bench:trivial_cxx //tools/bench:libsignal_floor.so
  //tests:deep_recursion //tests:deep_recursion_nofp //platform/sampling:sampling_benchmark
  //tools/strata:strata //tools/strata:libstrata_record.so
  //base:libstrata_alloc.so //tests/native_allocations:alloc_bench_program
)
log "building (${build_flags[*]})"
# --keep_going: a target that does not build only empties its rows (n/a), the rest still run.
"${bazel_cmd[@]}" build "${build_flags[@]}" --keep_going "${TARGETS[@]}" >&2 ||
  log "WARNING: some targets did not build; their rows will show n/a"
BIN="$("${bazel_cmd[@]}" info "${build_flags[@]}" bazel-bin 2>/dev/null)"
STRATA_LIB="$BIN/base/libstrata_base.so"
TWO_WORKERS="$BIN/tests/two_workers_nofp"
BUSY_THREADS="$BIN/tools/bench/busy_threads"
SIGNAL_FLOOR="$BIN/tools/bench/libsignal_floor.so"
PROFILE_STATS="$BIN/tests/profile_stats"
GPERF_COUNT="$BIN/tests/gperf_count"
LIBPROFILER=""
for candidate in /usr/lib/x86_64-linux-gnu/libprofiler.so.0 /usr/lib64/libprofiler.so.0 \
    /usr/lib/libprofiler.so.0; do
  [[ -f "$candidate" ]] && { LIBPROFILER="$candidate"; break; }
done
# No profiler variable of ours may leak into the runs.
unset STRATA_STARTUP STRATA_SHUTDOWN STRATA_STARTUP_FEATURES STRATA_STARTUP_INTERVAL \
  STRATA_STARTUP_BUFFER_MB STRATA_STARTUP_FILTERS STRATA_LOGGING CPUPROFILE LD_PRELOAD

# --- Helpers.
ROWS=()
NOTES=()
# row MEASURE STRATA PEER RATIO TARGET MET
row() { ROWS+=("| $1 | $2 | $3 | $4 | $5 | $6 |"); }
note() { NOTES+=("$*"); }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# calc FORMAT EXPRESSION: the expression's value, or "n/a" when it cannot be computed (a
# measurement is missing, so the expression is malformed).
calc() {
  local v
  v=$(awk "BEGIN { printf \"$1\", $2 }" 2>/dev/null) && [[ -n "$v" ]] && echo "$v" || echo "n/a"
}
# yes/no from an awk condition; "n/a" when any number is missing.
met() {
  local cond="$1"
  shift
  local v
  for v in "$@"; do [[ -z "$v" ]] && { echo "n/a"; return; }; done
  awk "BEGIN { exit !($cond) }" && echo "yes" || echo "**no**"
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

LOAD_START="$(loadavg)"
log "load average at start: $LOAD_START"

# --- 1. Micro-benchmarks (CPU time per call, medians of $REPS repetitions).
# gbench_json BINARY FILTER CPUS -> JSON file path
# Arguments after CPUS, if any, are a command to run it under (e.g. chrt -f 1).
gbench_json() {
  local out="$WORK/gbench.$RANDOM.json"
  "${@:4}" taskset -c "$3" "$1" --benchmark_filter="$2" --benchmark_repetitions="$REPS" \
    --benchmark_report_aggregates_only=true --benchmark_format=json >"$out" 2>"$out.err" ||
    log "$(basename "$1") failed: $(tail -3 "$out.err")"
  echo "$out"
}
# gbench_value JSON NAME FIELD (cpu_time, real_time, bytes_per_second): NAME's median.
# Google Benchmark writes one "key": value per line.
# With a single repetition there is no median: the run itself is used.
gbench_value() {
  local want="$2_median"
  ((REPS < 2)) && want="$2"
  awk -v want="$want" -v key="\"$3\":" '
    /"name":/ { n = $0; sub(/.*"name": *"/, "", n); sub(/".*/, "", n) }
    n == want && index($0, key) { v = $0; sub(/.*: */, "", v); sub(/,$/, "", v); print v + 0; exit }' "$1"
}

log "micro-benchmarks: base (pinned to CPU $PIN_CPU)"
base_json="$(gbench_json "$BIN/base/base_benchmark" \
  'BM_EmptyLoop|BM_ReadTsc|BM_ClockGettimeMonotonic|BM_TimeStampNow|BM_LabelInactive|BM_MarkerInactive|BM_LabelActivePushPop|BM_MarkerUntypedInstant|BM_MarkerUntypedInterval|BM_MarkerTypedThreeFields|BM_MarkerFloor' \
  "$PIN_CPU")"
empty_ns=$(gbench_value "$base_json" BM_EmptyLoop cpu_time)
for pair in "LabelInactive:inactive STRATA_LABEL" "MarkerInactive:inactive STRATA_MARKER_UNTYPED"; do
  ns=$(gbench_value "$base_json" "BM_${pair%%:*}" cpu_time)
  row "${pair#*:} (CPU ns)" "$(calc %.2f "$ns")" "empty loop $(calc %.2f "$empty_ns")" \
    "$(calc %.2f "$ns / $empty_ns")×" "≤ 1.5 ns" "$(met "$ns <= 1.5" "$ns")"
done
ns=$(gbench_value "$base_json" BM_LabelActivePushPop cpu_time)
row "active label push + pop (CPU ns)" "$(calc %.2f "$ns")" "empty loop $(calc %.2f "$empty_ns")" \
  "$(calc %.1f "$ns / $empty_ns")×" "≤ 3 ns" "$(met "$ns <= 3" "$ns")"
for spec in "MarkerUntypedInstant:instant untyped marker:107:Perfetto TRACE_EVENT_INSTANT 107 (issue anchor):30" \
    "MarkerUntypedInterval:interval marker as one entry (end time read in the loop):196:Perfetto scoped slice 196; Tracy zone 23.2 (issue anchors):40" \
    "MarkerTypedThreeFields:typed marker, three fields:260:Perfetto slice + 1 int arg 260 (issue anchor):50"; do
  IFS=: read -r name label anchor peer target <<<"$spec"
  ns=$(gbench_value "$base_json" "BM_$name" cpu_time)
  row "$label (CPU ns)" "$(calc %.1f "$ns")" "$peer" "$(calc %.2f "$ns / $anchor")× Perfetto" \
    "≤ $target ns" "$(met "$ns <= $target" "$ns")"
done

# Issue 38: the markers against the timestamp floor measured in the same binary and run: one
# rdtsc, TimeStamp::Now() in a session (the Strata clock: rdtsc and the conversion table, the
# clock markers read) and clock_gettime(CLOCK_MONOTONIC) (what they read before issue 38).
tsc_ns=$(gbench_value "$base_json" BM_ReadTsc cpu_time)
now_ns=$(gbench_value "$base_json" BM_TimeStampNow cpu_time)
gettime_ns=$(gbench_value "$base_json" BM_ClockGettimeMonotonic cpu_time)
row "timestamp floor: one rdtsc / TimeStamp::Now() / clock_gettime (CPU ns)" \
  "Now() $(calc %.1f "$now_ns"); clock_gettime $(calc %.1f "$gettime_ns")" \
  "rdtsc $(calc %.1f "$tsc_ns")" \
  "$(calc %.2f "$now_ns / $tsc_ns")× / $(calc %.2f "$gettime_ns / $tsc_ns")× rdtsc" "reported" "—"
for spec in "MarkerUntypedInstant:instant untyped marker:1.3" \
    "MarkerUntypedInterval:interval marker (end read by the marker):1.5" \
    "MarkerTypedThreeFields:typed marker, three fields:1.8"; do
  IFS=: read -r name label target <<<"$spec"
  ns=$(gbench_value "$base_json" "BM_$name" cpu_time)
  row "$label against the timestamp floor (CPU ns, same run)" "$(calc %.1f "$ns")" \
    "rdtsc $(calc %.1f "$tsc_ns"); Now() $(calc %.1f "$now_ns")" \
    "$(calc %.2f "$ns / $tsc_ns")× rdtsc; $(calc %.2f "$ns / $now_ns")× Now()" "≤ $target× rdtsc (issue 38)" \
    "$(met "$ns <= $target * $tsc_ns" "$ns" "$tsc_ns")"
done

# Where the instant marker's time goes (base_benchmark's BM_MarkerFloor*: the marker's work
# written inline, no call and no checks, flushed into the session buffer as the marker's staging
# is): the stores and flushes alone, then with rdtscp and the conversion (the ordered floor),
# then with plain rdtsc (an unordered clock).
tscp_ns=$(gbench_value "$base_json" BM_ReadTscp cpu_time)
floor_stores_ns=$(gbench_value "$base_json" BM_MarkerFloorStoresOnly cpu_time)
floor_ordered_ns=$(gbench_value "$base_json" BM_MarkerFloorOrdered cpu_time)
floor_unordered_ns=$(gbench_value "$base_json" BM_MarkerFloorUnordered cpu_time)
instant_ns=$(gbench_value "$base_json" BM_MarkerUntypedInstant cpu_time)
row "instant marker's floor, inline: stores + flushes / + rdtscp and conversion / + rdtsc and conversion (CPU ns)" \
  "$(calc %.1f "$floor_stores_ns") / $(calc %.1f "$floor_ordered_ns") / $(calc %.1f "$floor_unordered_ns")" \
  "rdtsc $(calc %.1f "$tsc_ns"); rdtscp $(calc %.1f "$tscp_ns"); the marker $(calc %.1f "$instant_ns")" \
  "ordered floor $(calc %.2f "$floor_ordered_ns / $tsc_ns")× rdtsc; call and checks $(calc %.1f "$instant_ns - $floor_ordered_ns") ns" \
  "reported (issue 38: where the ns go)" "—"

log "micro-benchmarks: buffer (1 writer and memcpy pinned to CPU $PIN_CPU; 1 and 2 writers, each thread pinned to its own CPU of 0,1)"
buf1_json="$(gbench_json "$BIN/shared/buffer/buffer_benchmark" \
  'BM_MemcpyRing/64$|BM_ReserveAndPut/64/real_time/threads:1$' "$PIN_CPU")"
# The writer-count comparison at real-time priority (SCHED_FIFO, as root) when allowed: the two
# pinned writers then really run at once whatever else the machine runs (at load 9-14 without
# it each got a fraction of its CPU, and the ratio measured that: 0.5-1.7x a minute apart).
buf_fifo=()
buf_fifo_note=""
if chrt -f 1 true 2>/dev/null; then buf_fifo=(chrt -f 1); buf_fifo_note=", SCHED_FIFO"; fi
buf2_json="$(gbench_json "$BIN/shared/buffer/buffer_benchmark" \
  'BM_WritersWall/[12]/[01]/manual_time$' 0,1 "${buf_fifo[@]}")"
memcpy_bps=$(gbench_value "$buf1_json" BM_MemcpyRing/64 bytes_per_second)
put1_bps=$(gbench_value "$buf1_json" BM_ReserveAndPut/64/real_time/threads:1 bytes_per_second)
# BM_WritersWall/WRITERS/STAGED: all writers' bytes per wall second of the whole run.
put1_both_bps=$(gbench_value "$buf2_json" BM_WritersWall/1/0/manual_time bytes_per_second)
put2_bps=$(gbench_value "$buf2_json" BM_WritersWall/2/0/manual_time bytes_per_second)
row "buffer ReserveAndPut 64 B, 1 writer (GB/s)" "$(calc %.2f "$put1_bps / 1e9")" \
  "memcpy into a 16 MiB ring $(calc %.1f "$memcpy_bps / 1e9")" \
  "$(calc %.1f "100 * $put1_bps / $memcpy_bps") %" "≥ 10 %" \
  "$(met "$put1_bps >= 0.1 * $memcpy_bps" "$put1_bps" "$memcpy_bps")"
row "buffer ReserveAndPut 64 B, 2 writers' total per wall second of the whole run, each entry under the buffer's lock (GB/s)" "$(calc %.2f "$put2_bps / 1e9")" \
  "1 writer $(calc %.2f "$put1_both_bps / 1e9") (same process; threads pinned to CPUs 0 and 1$buf_fifo_note)" \
  "$(calc %.2f "$put2_bps / $put1_both_bps")×" "≥ 1×" \
  "$(met "$put2_bps >= $put1_both_bps" "$put2_bps" "$put1_both_bps")"
staged1_bps=$(gbench_value "$buf2_json" BM_WritersWall/1/1/manual_time bytes_per_second)
staged2_bps=$(gbench_value "$buf2_json" BM_WritersWall/2/1/manual_time bytes_per_second)
row "buffer through per-thread StagingArea (16 KiB batches, one lock each), 64 B, 2 writers' total (GB/s)" \
  "$(calc %.2f "$staged2_bps / 1e9")" \
  "1 writer $(calc %.2f "$staged1_bps / 1e9"); direct ReserveAndPut 1 writer $(calc %.2f "$put1_both_bps / 1e9")" \
  "$(calc %.2f "$staged2_bps / $staged1_bps")× ($(calc %.2f "$staged2_bps / $put1_both_bps")× direct 1 writer)" "≥ 1×" \
  "$(met "$staged2_bps >= $staged1_bps && $staged2_bps >= $put1_both_bps" "$staged2_bps" "$staged1_bps" "$put1_both_bps")"

# --- 2. Callgrind instruction counts (loop of N, minus the empty loop).
log "callgrind instruction counts"
CALLGRIND_N=200000
callgrind_ir() {  # CASE -> instructions counted between START/STOP
  local out="$WORK/callgrind.$1.out"
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
    "$BIN/tools/bench/callgrind_driver" "$1" "$CALLGRIND_N" >"$WORK/callgrind.$1.log" 2>&1 ||
    { log "callgrind $1 failed: $(tail -3 "$WORK/callgrind.$1.log")"; return; }
  awk '/^totals:/ { print $2; exit }' "$out"
}
empty_ir=$(callgrind_ir empty)
CALLGRIND_TEXT=""
for spec in "label_inactive:inactive label" "marker_inactive:inactive marker" \
    "label_active:label push + pop" "marker_instant:instant marker" \
    "marker_interval:interval marker (incl. TimeStamp::Now)" "marker_typed3:typed marker, 3 fields"; do
  ir=$(callgrind_ir "${spec%%:*}")
  per=$([[ -n "$ir" && -n "$empty_ir" ]] && calc %.1f "($ir - $empty_ir) / $CALLGRIND_N")
  CALLGRIND_TEXT+="${spec#*:} ${per:-n/a}; "
done
row "callgrind instructions per call, loop subtracted" "${CALLGRIND_TEXT%; }" \
  "empty loop $([[ -n "$empty_ir" ]] && calc %.1f "$empty_ir / $CALLGRIND_N") per iteration" \
  "—" "recorded (no target)" "—"

# --- 3. Whole-program comparisons.
# Each run stores "<work ms>" in $WORK/runs/<variant> (one line per run) and any counts in
# $WORK/runs/<variant>.<what>.
mkdir -p "$WORK/runs"
ITER_TWO=22000000    # ~1.2 s of CPU per worker
ITER_16=2750000      # 16 threads, the same total work
two_workers_ms() {   # the work's wall time: the later of the two workers' lifetimes
  awk '/^two_workers: thread=/ { for (i = 1; i <= NF; ++i) if ($i ~ /^wall_ms=/) { v = substr($i, 9) + 0; if (v > m) m = v } } END { print m }' "$1"
}
worker_cpu_ms() {    # FILE THREAD
  awk -v t="thread=$2" '$2 == t { for (i = 1; i <= NF; ++i) if ($i ~ /^cpu_ms=/) print substr($i, 8) }' "$1"
}
busy_ms() { awk '/^busy_threads:/ { for (i = 1; i <= NF; ++i) if ($i ~ /^work_wall_ms=/) print substr($i, 14) }' "$1"; }
stat_field() {       # STATS_FILE KIND SELECTOR KEY
  awk -v k="$2" -v s="$3" -v key="$4" '$1 == k && (s == "" || index($0, " " s " ")) {
    for (i = 2; i <= NF; ++i) if (index($i, key "=") == 1) { print substr($i, length(key) + 2); exit } }' "$1"
}
record() { echo "$2" >>"$WORK/runs/$1"; }

run_variant() {
  local v="$1" out="$WORK/out.$1" prof="$WORK/profile.$1.json"
  rm -f "$prof"
  case "$v" in
    plain2) "$TWO_WORKERS" --iterations "$ITER_TWO" >"$out" 2>&1 ;;
    strata2)
      env LD_PRELOAD="$STRATA_LIB" STRATA_STARTUP=1 STRATA_SHUTDOWN="$prof" \
        "$TWO_WORKERS" --iterations "$ITER_TWO" >"$out" 2>&1 ;;
    strata2timer)  # The fallback source: CPU-clock timers (tick-bound).
      env LD_PRELOAD="$STRATA_LIB" STRATA_STARTUP=1 STRATA_SHUTDOWN="$prof" STRATA_SAMPLING_SOURCE=timer \
        "$TWO_WORKERS" --iterations "$ITER_TWO" >"$out" 2>&1 ;;
    gperf2)
      env LD_PRELOAD="$LIBPROFILER" CPUPROFILE="$WORK/gperf.prof" CPUPROFILE_FREQUENCY=1000 \
        "$TWO_WORKERS" --iterations "$ITER_TWO" >"$out" 2>&1 ;;
    precise1k|precise4k)
      env LD_PRELOAD="$STRATA_LIB" STRATA_STARTUP=1 STRATA_SHUTDOWN="$prof" \
        STRATA_STARTUP_FEATURES=precise STRATA_STARTUP_INTERVAL="$([[ $v == precise1k ]] && echo 1 || echo 0.25)" \
        "$TWO_WORKERS" --iterations "$ITER_TWO" >"$out" 2>&1 ;;
    perf1k|perf4k)
      perf record -q -e cpu-clock -F "$([[ $v == perf1k ]] && echo 1000 || echo 4000)" \
        -o "$WORK/perf.data" -- "$TWO_WORKERS" --iterations "$ITER_TWO" >"$out" 2>&1 ;;
    plain16) "$BUSY_THREADS" --threads 16 --iterations "$ITER_16" >"$out" 2>&1 ;;
    precise16)
      env LD_PRELOAD="$STRATA_LIB" STRATA_STARTUP=1 STRATA_SHUTDOWN="$prof" \
        STRATA_STARTUP_FEATURES=precise STRATA_STARTUP_INTERVAL=1 \
        "$BUSY_THREADS" --threads 16 --iterations "$ITER_16" >"$out" 2>&1 ;;
    perf16)
      perf record -q -e cpu-clock -F 1000 -o "$WORK/perf.data" -- \
        "$BUSY_THREADS" --threads 16 --iterations "$ITER_16" >"$out" 2>&1 ;;
    # The in-process signal floor: empty handler (floor*), TSC + 100 bytes (floor*rec), empty
    # handler plus Strata's other wake-ups (floor*mw: main thread's timer, a waking thread).
    floor4k|floor4krec|floor4kmw|floor16|floor16rec|floor16mw)
      local floor_env=(SIGNAL_FLOOR_HZ="$([[ $v == floor4k* ]] && echo 4000 || echo 1000)")
      [[ $v == *rec ]] && floor_env+=(SIGNAL_FLOOR_HANDLER=record)
      [[ $v == *mw ]] && floor_env+=(SIGNAL_FLOOR_MAIN=1 SIGNAL_FLOOR_WAKER=1)
      if [[ $v == floor16* ]]; then
        env LD_PRELOAD="$SIGNAL_FLOOR" "${floor_env[@]}" \
          "$BUSY_THREADS" --threads 16 --iterations "$ITER_16" >"$out" 2>&1
      else
        env LD_PRELOAD="$SIGNAL_FLOOR" "${floor_env[@]}" \
          "$TWO_WORKERS" --iterations "$ITER_TWO" >"$out" 2>&1
      fi ;;
  esac
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    log "run $v failed (status $rc): $(tail -2 "$out")"
    echo "$v: status $rc: $(tail -2 "$out" | tr '\n' ' ')" >>"$WORK/runs/failures"
    return
  fi
  local is16=0
  [[ $v == *16* ]] && is16=1
  if ((is16)); then record "$v" "$(busy_ms "$out")"; else record "$v" "$(two_workers_ms "$out")"; fi
  # CPU time of the work: two_workers' two workers (their own thread CPU time: the signal
  # handlers, unwinding and the interrupts charged to them; not the profilers' helper
  # threads), busy_threads' process before exit (Strata's sampler thread included).
  if ((is16)); then
    record "$v.cpu" "$(awk '/^busy_threads:/ { for (i = 1; i <= NF; ++i) if ($i ~ /^cpu_ms=/) print substr($i, 8) }' "$out")"
  else
    record "$v.cpu" "$(awk '/^two_workers: thread=/ { for (i = 1; i <= NF; ++i) if ($i ~ /^cpu_ms=/) c += substr($i, 8) } END { print c }' "$out")"
  fi
  local w cpu
  case "$v" in
    strata2|strata2timer)
      "$PROFILE_STATS" "$prof" worker-alpha:alpha_work_loop worker-beta:beta_work_loop \
        >"$WORK/stats" 2>&1 || { log "profile_stats failed on $v"; return; }
      for w in alpha beta; do
        cpu=$(worker_cpu_ms "$out" "worker-$w")
        record "$v.rate" "$(calc %.1f "$(stat_field "$WORK/stats" thread "name=worker-$w" cpu_samples) / $cpu * 1000")"
        stat_field "$WORK/stats" match "thread=worker-$w" count >>"$WORK/runs/$v.caller"
        stat_field "$WORK/stats" match "thread=worker-$w" samples >>"$WORK/runs/$v.samples"
      done ;;
    gperf2)
      "$GPERF_COUNT" "$WORK/gperf.prof" "$TWO_WORKERS" alpha=spin_alpha_leaf,alpha_work_loop \
        beta=spin_beta_leaf,beta_work_loop >"$WORK/stats" 2>&1 || { log "gperf_count failed"; return; }
      for w in alpha beta; do
        cpu=$(worker_cpu_ms "$out" "worker-$w")
        record "$v.rate" "$(calc %.1f "$(awk -v g="group=$w" '$2 == g { print substr($3, 9) }' "$WORK/stats") / $cpu * 1000")"
      done ;;
    perf4k|perf16)  # Samples taken, for the cost per sample.
      record "$v.samples" "$(perf report -i "$WORK/perf.data" --stats 2>/dev/null | awk '/SAMPLE events:/ { print $3; exit }')" ;;
    floor*)  # Signals handled by the timed threads.
      record "$v.samples" "$(awk '/^signal_floor:/ { for (i = 1; i <= NF; ++i) if ($i ~ /^signals=/) print substr($i, 9) }' "$out")" ;;
    precise*)
      "$PROFILE_STATS" "$prof" >"$WORK/stats" 2>&1 || { log "profile_stats failed on $v"; return; }
      # The busy threads' real samples (CPU delta > 0: taken by a signal, not copied).
      record "$v.samples" "$(awk '$1 == "thread" && ($3 ~ /^name=worker-/ || $3 ~ /^name=busy-/) {
          for (i = 2; i <= NF; ++i) if ($i ~ /^cpu_samples=/) s += substr($i, 13) } END { print s + 0 }' "$WORK/stats")"
      # Samples per busy thread per second of its life (wall clock: precise mode's rate).
      record "$v.rate" "$(awk '$1 == "thread" && ($3 ~ /^name=worker-/ || $3 ~ /^name=busy-/) {
          for (i = 2; i <= NF; ++i) { if ($i ~ /^samples=/) s += substr($i, 9); if ($i ~ /^span_ms=/) c += substr($i, 9) } }
          END { if (c > 0) printf "%.1f", s / c * 1000 }' "$WORK/stats")" ;;
  esac
}

VARIANTS=(plain2 strata2 strata2timer precise1k precise4k plain16 precise16)
[[ -f "$SIGNAL_FLOOR" ]] && VARIANTS+=(floor4k floor4krec floor4kmw floor16 floor16rec floor16mw)
[[ -n "$LIBPROFILER" ]] && VARIANTS+=(gperf2) || note "gperftools' libprofiler.so not found: no gperftools rows."
PERF_OK=0
if perf_error="$(perf record -q -e cpu-clock -F 1000 -o "$WORK/perf.probe" -- true 2>&1)"; then
  PERF_OK=1
  VARIANTS+=(perf1k perf4k perf16)
else
  note "perf record cannot run here: $perf_error"
fi
log "whole-program comparisons: $ROUNDS rounds of ${#VARIANTS[@]} variants (random order each round)"
for ((round = 1; round <= ROUNDS; ++round)); do
  for v in $(printf '%s\n' "${VARIANTS[@]}" | shuf); do run_variant "$v"; done
  log "  round $round done (load $(loadavg))"
done
med() { [[ -f "$WORK/runs/$1" ]] && median <"$WORK/runs/$1"; }
slow() {  # VARIANT BASELINE -> slowdown in percent of the medians
  local a b
  a=$(med "$1")
  b=$(med "$2")
  [[ -n "$a" && -n "$b" ]] && calc %.1f "($a / $b - 1) * 100"
}
sign() { [[ -n "$1" ]] && awk -v v="$1" 'BEGIN { printf "%+.1f %%", v }'; }

# Default mode: perf task-clock events at the requested 1 kHz (issue 17), against perf record
# at the same rate; its fallback, CPU-clock timers at the kernel tick, against gperftools.
s_def=$(slow strata2 plain2)
c_def=$(slow strata2.cpu plain2.cpu)
s_pf=$(slow perf1k plain2)
c_pf=$(slow perf1k.cpu plain2.cpu)
r_def=$(med strata2.rate)
row "default mode (perf task-clock events) slowdown, 2 busy threads, 1 ms (medians of $ROUNDS runs: work time / CPU time; samples per busy thread per CPU-second: $r_def)" \
  "$(sign "$s_def") / $(sign "$c_def")" "$([[ $PERF_OK == 1 ]] && echo "perf record -F 1000 $(sign "$s_pf") / $(sign "$c_pf")" || echo "perf cannot record here")" \
  "$([[ -n "$c_def" && -n "$c_pf" ]] && calc %+.1f "$c_def - $c_pf") pt (CPU)" "≤ perf + 2 pt" \
  "$(met "$c_def <= $c_pf + 2" "$c_def" "$c_pf")"
row "default mode samples per busy thread per CPU-second at 1 ms (median over runs × workers)" \
  "$r_def" "requested 1 000" "$([[ -n "$r_def" ]] && calc %.3f "$r_def / 1000")×" "1 000 ± 5 %" \
  "$(met "$r_def >= 950 && $r_def <= 1050" "$r_def")"
s_tm=$(slow strata2timer plain2)
s_gp=$(slow gperf2 plain2)
c_tm=$(slow strata2timer.cpu plain2.cpu)
c_gp=$(slow gperf2.cpu plain2.cpu)
row "fallback source (CPU-clock timers) slowdown, 2 busy threads, 1 ms requested (work time / CPU time)" \
  "$(sign "$s_tm") / $(sign "$c_tm")" "gperftools 1000 Hz $(sign "$s_gp") / $(sign "$c_gp")" \
  "$([[ -n "$c_tm" && -n "$c_gp" ]] && calc %+.1f "$c_tm - $c_gp") pt (CPU)" "≤ gperftools + 1 pt" \
  "$(met "$c_tm <= $c_gp + 1" "$c_tm" "$c_gp")"
r_tm=$(med strata2timer.rate)
r_gp=$(med gperf2.rate)
row "fallback source samples per busy thread per CPU-second (median over runs × workers)" \
  "$r_tm" "gperftools $r_gp" "$([[ -n "$r_tm" && -n "$r_gp" ]] && calc %.2f "$r_tm / $r_gp")×" \
  "≥ gperftools" "$(met "$r_tm >= $r_gp" "$r_tm" "$r_gp")"
if [[ -f "$WORK/runs/strata2.caller" ]]; then
  complete=$(paste "$WORK/runs/strata2.caller" "$WORK/runs/strata2.samples" |
    awk '{ c += $1; n += $2 } END { if (n > 0) printf "%.2f", 100 * c / n }')
  row "default mode stacks with the frameless leaf's caller (all runs' worker samples)" \
    "$complete %" "—" "—" "≥ 99 %" "$(met "$complete >= 99" "$complete")"
fi
for spec in "precise1k:perf1k:plain2:2 busy threads, 1 kHz" "precise4k:perf4k:plain2:2 busy threads, 4 kHz" \
    "precise16:perf16:plain16:16 busy threads, 1 kHz"; do
  IFS=: read -r sv pv base label <<<"$spec"
  s=$(slow "$sv" "$base")
  p=$(slow "$pv" "$base")
  sc=$(slow "$sv.cpu" "$base.cpu")
  pc=$(slow "$pv.cpu" "$base.cpu")
  row "precise mode slowdown, $label (work time / CPU time; Strata samples per thread per second: $(med "$sv.rate"))" \
    "$(sign "$s") / $(sign "$sc")" "$([[ $PERF_OK == 1 ]] && echo "perf record -F $([[ $pv == perf4k ]] && echo 4000 || echo 1000) $(sign "$p") / $(sign "$pc")" || echo "perf cannot record here")" \
    "$([[ -n "$sc" && -n "$pc" ]] && calc %+.1f "$sc - $pc") pt (CPU)" \
    "$([[ $sv == precise1k ]] && echo "≤ perf + 2 pt" || echo "reported (the issue's target is 1 kHz, 2 threads); perf + 2 pt shown")" \
    "$(if [[ $sv == precise1k ]]; then met "$sc <= $pc + 2" "$sc" "$pc"
       elif [[ -n "$sc" && -n "$pc" ]] && awk -v s="$sc" -v p="$pc" 'BEGIN { exit !(s <= p + 2) }'; then echo "— (within perf + 2 pt)"
       else echo "— (above perf + 2 pt: see the floor rows)"; fi)"
done
# The in-process signal floor beside precise mode, and the CPU cost per sample.
# per_sample VARIANT BASELINE: µs of the work's CPU time per sample (medians).
per_sample() {
  local c b n
  c=$(med "$1.cpu")
  b=$(med "$2.cpu")
  n=$(med "$1.samples")
  [[ -n "$c" && -n "$b" && -n "$n" ]] && calc %.1f "($c - $b) * 1000 / $n"
}
for spec in "4k:precise4k:perf4k:plain2:2 busy threads, 4 kHz" "16:precise16:perf16:plain16:16 busy threads, 1 kHz"; do
  IFS=: read -r f sv pv base label <<<"$spec"
  [[ -f "$WORK/runs/floor$f.cpu" ]] || continue
  sc=$(slow "$sv.cpu" "$base.cpu")
  fc=$(slow "floor$f.cpu" "$base.cpu")
  frc=$(slow "floor${f}rec.cpu" "$base.cpu")
  fmc=$(slow "floor${f}mw.cpu" "$base.cpu")
  pc=$(slow "$pv.cpu" "$base.cpu")
  row "in-process signal floor, $label: CPU-time slowdown of the same per-thread timers with an empty handler / TSC + 100 B / empty + Strata's other wake-ups (main thread's timer, a thread waking every interval)" \
    "Strata precise $(sign "$sc")" "floor $(sign "$fc") / $(sign "$frc") / $(sign "$fmc"); perf $(sign "$pc")" \
    "$([[ -n "$sc" && -n "$fmc" ]] && calc %+.1f "$sc - $fmc") pt vs floor with the same wake-ups" \
    "reported (≤ perf + 2 pt is the target above)" "—"
  row "CPU cost per sample, $label (µs of the work's CPU time per busy-thread sample; medians)" \
    "$(per_sample "$sv" "$base")" "floor: empty $(per_sample "floor$f" "$base"), TSC + 100 B $(per_sample "floor${f}rec" "$base"), with Strata's wake-ups $(per_sample "floor${f}mw" "$base"); perf $(per_sample "$pv" "$base")" \
    "—" "reported" "—"
done
[[ -f "$WORK/runs/failures" ]] && note "failed runs: $(tr '\n' ';' <"$WORK/runs/failures")"

# --- 4. Profile writing.
log "profile writing (1 M samples + 1 M markers, 3 runs)"
for i in 1 2 3; do
  "$BIN/tools/bench/profile_write_bench" --out "$WORK/write.json" >>"$WORK/write.log" 2>&1 ||
    log "profile_write_bench failed: $(tail -2 "$WORK/write.log")"
done
write_field() { awk -v k="$1" '/^profile_write / { for (i = 2; i <= NF; ++i) if (index($i, k "=") == 1) print substr($i, length(k) + 2) }' "$WORK/write.log" | median; }
w_s=$(write_field write_s)
w_cpu=$(write_field write_cpu_s)
w_mbps=$(write_field mb_per_s)
w_mbpcpu=$(write_field mb_per_cpu_s)
w_mb=$(write_field bytes)
w_peak=$(write_field write_peak_extra_mb)
w_buf=$(write_field maxrss_before_mb)
# Wall time counts the time the writing thread waited for a CPU on a shared machine; its own
# CPU time does not. Both are shown; "met" needs both.
row "profile writing speed, MB/s of JSON (median of 3; wall / writing thread's CPU)" \
  "$w_mbps / $w_mbpcpu" "—" "—" "≥ 150 MB/s" \
  "$(met "$w_mbps >= 150 && $w_mbpcpu >= 150" "$w_mbps" "$w_mbpcpu")"
row "1 M samples + 1 M markers written, s ($(calc %.0f "$w_mb / 1e6") MB; wall / CPU)" "$w_s / $w_cpu" "—" "—" \
  "≤ 2 s" "$(met "$w_s <= 2 && $w_cpu <= 2" "$w_s" "$w_cpu")"
row "peak memory while writing, MiB above the filled buffer's peak RSS of ${w_buf:-?} MiB" \
  "${w_peak:-n/a}" "—" "—" "reported" "—"

# --- 5. Start-up, size, NEEDED.
log "start-up (hyperfine, 30 alternating sets)"
# At real-time priority (SCHED_FIFO, as root) when allowed: the processes measured then never
# wait behind the machine's other load (at a load average of 10 that queueing added up to a
# millisecond to either side, more than the difference measured). Also used for takeover.
FIFO=()
FIFO_NOTE=""
if chrt -f 1 true 2>/dev/null; then FIFO=(chrt -f 1); FIFO_NOTE=", SCHED_FIFO"; fi
# An empty C++ library that only needs libstdc++: what loading libstdc++ alone costs a C program.
printf '#include <string>\nstd::string strata_bench_keep = "x";\n' >"$WORK/empty_cxx.cc"
g++ -O2 -shared -fPIC -o "$WORK/libempty_cxx.so" "$WORK/empty_cxx.cc" 2>/dev/null || log "cannot build the libstdc++-only control library"
# Thirty short sets rather than three long ones: hyperfine runs each command's runs in one
# block, and this VM drifts (other tenants, even at SCHED_FIFO) by a few tenths of a
# millisecond between blocks of 300 runs, as much as the difference measured.
for i in $(seq 30); do
  "${FIFO[@]}" hyperfine -N --warmup 5 --runs 30 --export-csv "$WORK/hf.$i.csv" \
    "env $BIN/tools/bench/trivial_cxx" "env LD_PRELOAD=$STRATA_LIB $BIN/tools/bench/trivial_cxx" \
    "env /bin/true" "env LD_PRELOAD=$STRATA_LIB /bin/true" "env LD_PRELOAD=$WORK/libempty_cxx.so /bin/true" \
    >"$WORK/hf.$i.log" 2>&1 || log "hyperfine failed: $(tail -2 "$WORK/hf.$i.log")"
done
# The median column (seconds) of command N (CSV row N + 1), in ms, median over the sets.
hf_ms() { for f in "$WORK"/hf.*.csv; do awk -F, -v r="$(($1 + 1))" 'NR == r { print $4 * 1000 }' "$f"; done | median; }
# user + system (mean, seconds) of command N, in ms: the process's own CPU, which waiting for
# a CPU on a busy machine does not inflate.
hf_cpu_ms() { for f in "$WORK"/hf.*.csv; do awk -F, -v r="$(($1 + 1))" 'NR == r { print ($5 + $6) * 1000 }' "$f"; done | median; }
hf_cxx=$(hf_ms 1)
hf_cxx_pre=$(hf_ms 2)
hf_true=$(hf_ms 3)
hf_true_pre=$(hf_ms 4)
hf_true_stdcxx=$(hf_ms 5)
row "start-up of a trivial C++ program, preloaded but inactive (ms, hyperfine median of 30 × 30$FIFO_NOTE; CPU = user + sys)" \
  "$(calc %.3f "$hf_cxx_pre") ($(calc %+.3f "$hf_cxx_pre - $hf_cxx"); CPU $(calc %+.3f "$(hf_cpu_ms 2) - $(hf_cpu_ms 1)"))" \
  "without preload $(calc %.3f "$hf_cxx") (CPU $(calc %.3f "$(hf_cpu_ms 1)"))" \
  "$(calc %.2f "$hf_cxx_pre / $hf_cxx")×" "≤ +0.5 ms" "$(met "$hf_cxx_pre - $hf_cxx <= 0.5" "$hf_cxx_pre" "$hf_cxx")"
row "start-up of /bin/true (C, no libstdc++), preloaded but inactive (ms)" \
  "$(calc %.3f "$hf_true_pre") ($(calc %+.3f "$hf_true_pre - $hf_true"); CPU $(calc %+.3f "$(hf_cpu_ms 4) - $(hf_cpu_ms 3)"))" \
  "without $(calc %.3f "$hf_true"); an empty library needing libstdc++: $(calc %+.3f "$hf_true_stdcxx - $hf_true") (CPU $(calc %+.3f "$(hf_cpu_ms 5) - $(hf_cpu_ms 3)"))" \
  "$(calc %.2f "$hf_true_pre / $hf_true")×" "≤ +0.5 ms" "$(met "$hf_true_pre - $hf_true <= 0.5" "$hf_true_pre" "$hf_true")"
strip --strip-all -o "$WORK/libstrata_base.stripped.so" "$STRATA_LIB"
size_kib=$(calc %.0f "$(stat -c %s "$WORK/libstrata_base.stripped.so") / 1024")
row "libstrata_base.so stripped (KiB)" "$size_kib" "—" "—" "≤ 512 KiB" "$(met "$size_kib <= 512" "$size_kib")"
needed=$(readelf -d "$STRATA_LIB" | awk -F'[][]' '/NEEDED/ { printf "%s%s", sep, $2; sep = ", " }')
bad_needed=$(readelf -d "$STRATA_LIB" | awk -F'[][]' '/NEEDED/ { print $2 }' |
  grep -Ev '^(libc\.so|libstdc\+\+\.so|libunwind|libm\.so|libgcc_s\.so|ld-linux)' | tr '\n' ' ')
# libm and libgcc_s are libstdc++'s own NEEDED entries (libgcc_s, the C++ runtime's unwinder,
# stays shared when libstdc++ is linked statically), ld-linux is the loader; anything else is
# an extra dependency.
row "libstrata_base.so NEEDED (readelf -d; libunwind is dlopened, so not listed)" "$needed" "—" "—" \
  "libc, libstdc++, libunwind only" "$([[ -z "$bad_needed" ]] && echo "yes (libm, libgcc_s: the C++ runtime's own)" || echo "**no** ($bad_needed)")"

# --- 6. Takeover gap.
log "takeover (dlopen and linked, 3 runs each${FIFO_NOTE})"
# Under SCHED_FIFO when allowed (see start-up): CPU-clock timers fire at the 250 Hz tick only
# when the thread is running then, so a busy thread that the machine's other load keeps
# preempting goes many intervals without a sample, takeover or not (at load 10-16, 6.8
# intervals away from the takeover). At real-time priority it runs at every tick, and the
# gap measures what the takeover itself loses.
for i in 1 2 3; do
  for mode in dlopen linked; do
    "${FIFO[@]}" env LD_PRELOAD="$STRATA_LIB" LD_LIBRARY_PATH="$BIN/full" STRATA_STARTUP=1 \
      STRATA_SHUTDOWN="$WORK/takeover.exit.json" TAKEOVER_PROFILE="$WORK/takeover.json" \
      "$BIN/tests/takeover/takeover_$mode" >"$WORK/takeover.log" 2>&1 ||
      log "takeover_$mode failed: $(tail -2 "$WORK/takeover.log")"
    "$BIN/tests/takeover/takeover_check" "$WORK/takeover.json" --thread busy-worker \
      --markers base-before-1,base-before-2,takeover,base-after-1,full-after-1,base-after-2,full-after-2 \
      --expect-full >"$WORK/takeover.check" 2>&1
    awk '/^RESULT / { for (i = 2; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] }
         if (v["effective_interval_ms"] > 0) printf "%.2f %.2f %.3f %.2f %.3f\n", v["max_cpu_gap_ms"] / v["effective_interval_ms"], v["baseline_cpu_gap_ms"] / v["effective_interval_ms"], v["effective_interval_ms"], v["handover_cpu_gap_ms"] / v["effective_interval_ms"], v["handover_ms"] }' \
      "$WORK/takeover.check" >>"$WORK/takeover.gaps"
  done
done
gap_max=$(awk '$1 > m { m = $1 } END { print m }' "$WORK/takeover.gaps")
gap_med=$(cut -d' ' -f1 "$WORK/takeover.gaps" | median)
base_med=$(cut -d' ' -f2 "$WORK/takeover.gaps" | median)
interval_med=$(cut -d' ' -f3 "$WORK/takeover.gaps" | median)
handover_max=$(awk '$4 > m { m = $4 } END { print m }' "$WORK/takeover.gaps")
handover_ms_med=$(cut -d' ' -f5 "$WORK/takeover.gaps" | median)
row "largest CPU-time sample gap across takeover, 20 ms before to 50 ms after (intervals of ${interval_med:-?} ms$FIFO_NOTE; max of $(wc -l <"$WORK/takeover.gaps") runs, median $gap_med; the hand-over itself, median ${handover_ms_med:-?} ms: gap at most ${handover_max:-?})" \
  "$gap_max" "same runs away from takeover: median $base_med" "—" "≤ 2 intervals" \
  "$(met "$gap_max <= 2" "$gap_max")"

# --- 7. Deep stacks (issue 38): walk cost per frame on the same stacks, and the CPU cost of
# sampling a 1 000-frame recursion at 1 kHz against depth 10 and `perf record -F 1000 -g`.
if [[ -x "$BIN/platform/sampling/sampling_benchmark" ]]; then
  "$BIN/platform/sampling/sampling_benchmark" 1 >"$WORK/walks.txt" 2>&1
  walk_field() { awk -v w="$1" -v d="$2" -v c="$3" '$0 ~ "^" w " " && $(NF - 6) == d { print $(NF - c) }' "$WORK/walks.txt"; }
  for w in "frame pointers" "libunwind" "libunwind-all"; do
    row "stack walk of 1 000 frames in the handler, $w: p50 µs (ns per frame)" \
      "$(calc "%.1f" "$(walk_field "$w" 1000 4) / 1000") ($(walk_field "$w" 1000 0))" "—" "—" "—" "—"
  done
fi
for depth in 10 1000; do
  STRATA_BIN="$BIN" tools/bench/deep_stacks.sh "$ROUNDS" "$depth" >"$WORK/deep.$depth.txt" 2>&1
done
deep_pct() { awk -v v="$1" '$1 == "median" && $2 == v { sub("overhead_pct=", "", $4); print $4 + 0 }' "$WORK/deep.$2.txt"; }
row "CPU cost of 1 kHz sampling, 1 000-frame recursion (10 frames: $(deep_pct strata 10) %)" \
  "$(deep_pct strata 1000) %" "perf $(deep_pct perf 1000) %" "—" "≤ 5 %" \
  "$(met "$(deep_pct strata 1000) <= 5" "$(deep_pct strata 1000)")"
# The handler's own cost (issue 34): the 1 000-frame recursion's share with 5 % of the CPU.
STRATA_BIN="$BIN" tools/bench/deep_share.sh "$ROUNDS" 5 1000 >"$WORK/deep_share.txt" 2>&1
share_of() { awk -v v="$1" '$1 == "median" && $2 == v { sub("share_pct=", "", $3); print $3 }' "$WORK/deep_share.txt"; }
share_gap=$(calc "%.2f" "$(share_of strata-nofp) - $(share_of perf)")
[[ "$share_gap" == n/a ]] && share_gap=""
row "1 000-frame recursion with 5 % of the CPU (plain: $(share_of plain) %): its share of the samples, libunwind on every frame (default walker: $(share_of strata) %, frame pointers: $(share_of strata-fp) %)" \
  "$(share_of strata-nofp) %" "perf $(share_of perf) %" "${share_gap:-?} points" "within 1 point of perf" \
  "$(met "${share_gap#-} <= 1" "${share_gap:-}")"

# --- 8. strata record of a process-heavy script (issue 38): tools/bench/record_processes_bench.sh.
log "strata record of $BENCH_RECORD_PROCESSES short processes ($ROUNDS interleaved rounds)"
STRATA_BIN="$BIN" RECORD_BENCH_TABLE_OUT="$WORK/record.md" \
  tools/bench/record_processes_bench.sh "$ROUNDS" "$BENCH_RECORD_PROCESSES" >/dev/null 2>"$WORK/record.log" ||
  log "record_processes_bench.sh failed: $(tail -2 "$WORK/record.log")"
# record_field VARIANT COLUMN (2: wall s, 3: x plain, 4: x perf, 7: merged per s) from its table.
record_field() { awk -F'|' -v v="$1" -v c="$(($2 + 1))" '$2 ~ "^ " v " $" { gsub(/ /, "", $c); print $c }' "$WORK/record.md" 2>/dev/null; }
r_plain=$(record_field plain 2)
r_wall=$(record_field record 2)
r_x=$(record_field record 3)
r_xperf=$(record_field record 4)
r_merge=$(record_field record 7)
p_wall=$(record_field perf 2)
row "strata record of a script starting $BENCH_RECORD_PROCESSES /bin/true (wall s, medians; × plain / × perf record -g -F 1000)" \
  "${r_wall:-n/a}" "plain ${r_plain:-n/a}; perf record ${p_wall:-n/a}" "${r_x:-n/a}× plain; ${r_xperf:-n/a}× perf" \
  "≤ 1.3× plain and ≤ perf (issue 38)" \
  "$(met "$r_x <= 1.3 && $r_xperf <= 1" "$r_x" "$r_xperf")"
row "strata record's merge of those processes (processes per s)" "${r_merge:-n/a}" "—" "—" "≥ 1000 /s" \
  "$(met "${r_merge#> } >= 1000" "$r_merge")"

# --- 9. Native allocations (issue 37): the hooks' unsampled path and the feature's cost, beside
# gperftools' heap profiler and heaptrack (tools/bench_native_allocations.sh says how).
log "native allocations ($ROUNDS rounds)"
while IFS= read -r line; do
  [[ "$line" == "|"* ]] && ROWS+=("$line")
done < <("$repo/tools/bench_native_allocations.sh" "$BIN" "$ROUNDS")

# --- 10. Symbolication speed (issue 34): tools/bench/symbolicate_speed.sh.
log "symbolication speed: strata symbolicate against llvm-symbolizer"
sym_line=$(STRATA_BIN="$BIN" tools/bench/symbolicate_speed.sh 3 2>"$WORK/symbolicate.log" | grep -m1 'addresses=')
sym_field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$sym_line"; }
[[ -z "$sym_line" ]] && log "symbolicate_speed.sh failed: $(tail -2 "$WORK/symbolicate.log")"
row "symbolication, addresses per second: strata symbolicate (whole file) / llvm-symbolizer --inlining (per file), same $(sym_field addresses) addresses of g++ -O2 -c (best of 3)" \
  "$(sym_field strata_per_s)" "llvm-symbolizer $(sym_field llvm_per_s)" \
  "$([[ -n "$sym_line" ]] && calc %.2f "$(sym_field strata_per_s) / $(sym_field llvm_per_s)")×" "recorded (no target)" "—"

# --- The table.
LOAD_END="$(loadavg)"
{
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on: $(lscpu | awk -F: '/^Model name/ { gsub(/^ +/, "", $2); print $2; exit }'), $(nproc) CPUs, kernel $(uname -r); load average at start $LOAD_START, at end $LOAD_END. $ROUNDS whole-program rounds, $REPS micro-benchmark repetitions (pinned to CPU $PIN_CPU)."
  echo
  echo "| measure | Strata | peer or floor | ratio | target | met? |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
  for n in "${NOTES[@]}"; do echo; echo "Note: $n"; done
} >"$WORK/table.md"
cat "$WORK/table.md"
[[ -n "${BENCH_TABLE_OUT:-}" ]] && cp "$WORK/table.md" "$BENCH_TABLE_OUT"
exit 0
