#!/usr/bin/env bash
# Native allocation profiling's costs (issue 37; docs/benchmarks.md, "Native allocations";
# docs/memory.md): prints rows of tools/bench.sh's table (markdown, one per line), and the raw
# medians on stderr. tools/bench.sh runs it as its section 7; by hand, after a -c opt build:
#   tools/bench_native_allocations.sh BAZEL_BIN [ROUNDS]
# Measures, medians over ROUNDS rounds (default 5), each round running every variant once:
#   1. the unsampled path: ns of CPU per malloc(64)+free pair in one thread
#      (alloc_bench_program --micro): plain; libstrata_alloc.so loaded, feature off; on with
#      R = 1 GiB (the countdown and the free filter only); on at the default R;
#   2. alloc_bench_program (2 threads, 4 M allocations each: 90 % 16-256 B operator new, 9 %
#      256 B-4 KiB and 1 % 4-64 KiB malloc): CPU seconds (user + sys, children included)
#      plain, under Strata without and with nativeallocations (default R and 512 KiB; the
#      profile's save at exit included), and
#      beside it gperftools' heap profiler (libtcmalloc.so + HEAPPROFILE, against tcmalloc
#      alone) and heaptrack;
#   3. a real program: g++ -O2 compiling tools/strata/profile_model.cc (RapidJSON headers),
#      the same variants.
# BENCH_ALLOC_WORKLOADS="bench cxx" (default) selects 2 and 3; the micro-benchmark always runs.
# BENCH_ALLOC_BEFORE=DIR (a directory holding an earlier build's libstrata_base.so and
# libstrata_alloc.so) adds that build's nativeallocations variants at the default R and at
# 512 KiB to 2 and 3, in the same rounds: before and after in one run.
set -uo pipefail
BIN="${1:?usage: bench_native_allocations.sh BAZEL_BIN [ROUNDS]}"
ROUNDS="${2:-5}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d /tmp/strata-alloc-bench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
BASE="$BIN/base/libstrata_base.so"
ALLOC="$BIN/base/libstrata_alloc.so"
PROGRAM="$BIN/tests/native_allocations/alloc_bench_program"
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4
HEAPTRACK="$(command -v heaptrack || true)"
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }
log() { echo "bench_native_allocations: $*" >&2; }
for f in "$BASE" "$ALLOC" "$PROGRAM"; do [[ -f "$f" ]] || { log "missing $f"; exit 1; }; done
unset STRATA_STARTUP STRATA_SHUTDOWN STRATA_STARTUP_FEATURES STRATA_ALLOC_INTERVAL LD_PRELOAD HEAPPROFILE

STRATA=(STRATA_STARTUP=1 "STRATA_SHUTDOWN=$WORK/p-%p.json")
ON=("${STRATA[@]}" STRATA_STARTUP_FEATURES=nativeallocations)
# CPU seconds (user + sys, children included) of: env ARGS...
cpu_of() { /usr/bin/time -f "%U %S" -o "$WORK/time" env "$@" >"$WORK/out" 2>"$WORK/err"; awk '{ print $1 + $2 }' "$WORK/time"; }

# 1. Unsampled path.
for ((r = 0; r < ROUNDS; ++r)); do
  for v in plain inactive countdown default; do
    case "$v" in
      plain) e=() ;;
      inactive) e=(LD_PRELOAD="$BASE:$ALLOC" "${STRATA[@]}") ;;
      countdown) e=(LD_PRELOAD="$BASE:$ALLOC" "${ON[@]}" STRATA_ALLOC_INTERVAL=1G) ;;
      default) e=(LD_PRELOAD="$BASE:$ALLOC" "${ON[@]}") ;;
    esac
    env "${e[@]}" "$PROGRAM" --micro 50000000 | sed -n 's/ns_per_malloc_free_pair=//p' >>"$WORK/micro.$v"
  done
done
for v in plain inactive countdown default; do eval "micro_$v=$(median <"$WORK/micro.$v")"; done
log "micro ns/pair: plain $micro_plain inactive $micro_inactive countdown $micro_countdown default $micro_default"
echo "| native allocations: unsampled malloc(64)+free pair, 1 thread (CPU ns; hooks loaded, feature off / on with R = 1 GiB: countdown and free filter only / on at the default 64 KiB) | $(calc %.2f "$micro_inactive") / $(calc %.2f "$micro_countdown") / $(calc %.2f "$micro_default") | plain glibc $(calc %.2f "$micro_plain") | $(calc %.2f "$micro_countdown / $micro_plain")× (R = 1 GiB) | — | — |"

# 2 and 3. Whole programs.
CXX_ARGS=(g++ -std=c++17 -O2 -c "$repo/tools/strata/profile_model.cc" -I"$repo" -I"$repo/include" -o "$WORK/model.o")
variants=(plain strata strata_alloc strata_alloc_512k tcmalloc gperftools_heap heaptrack)
BEFORE="${BENCH_ALLOC_BEFORE:-}"
if [[ -n $BEFORE ]]; then
  for f in "$BEFORE/libstrata_base.so" "$BEFORE/libstrata_alloc.so"; do [[ -f "$f" ]] || { log "missing $f"; exit 1; }; done
  variants+=(before_alloc before_alloc_512k)
fi
for workload in ${BENCH_ALLOC_WORKLOADS:-bench cxx}; do
  if [[ $workload == bench ]]; then cmd=("$PROGRAM" 4000000); else cmd=("${CXX_ARGS[@]}"); fi
  if [[ $workload == cxx ]] && ! "${cmd[@]}" 2>/dev/null; then log "g++ cannot compile profile_model.cc here: skipped"; continue; fi
  for ((r = 0; r < ROUNDS; ++r)); do
    for v in "${variants[@]}"; do
      case "$v" in
        plain) e=() ;;
        strata) e=(LD_PRELOAD="$BASE" "${STRATA[@]}") ;;
        strata_alloc) e=(LD_PRELOAD="$BASE:$ALLOC" "${ON[@]}") ;;
        strata_alloc_512k) e=(LD_PRELOAD="$BASE:$ALLOC" "${ON[@]}" STRATA_ALLOC_INTERVAL=512K) ;;
        before_alloc) e=(LD_PRELOAD="$BEFORE/libstrata_base.so:$BEFORE/libstrata_alloc.so" "${ON[@]}") ;;
        before_alloc_512k) e=(LD_PRELOAD="$BEFORE/libstrata_base.so:$BEFORE/libstrata_alloc.so" "${ON[@]}" STRATA_ALLOC_INTERVAL=512K) ;;
        tcmalloc) [[ -f $TCMALLOC ]] || continue; e=(LD_PRELOAD="$TCMALLOC") ;;
        gperftools_heap) [[ -f $TCMALLOC ]] || continue; e=(LD_PRELOAD="$TCMALLOC" HEAPPROFILE="$WORK/heap") ;;
        heaptrack) [[ -n $HEAPTRACK ]] || continue; e=("$HEAPTRACK" -o "$WORK/heaptrack.$r") ;;
      esac
      cpu_of "${e[@]}" "${cmd[@]}" >>"$WORK/$workload.$v"
      rm -f "$WORK"/p-*.json "$WORK"/heap.* "$WORK"/heaptrack.*
    done
  done
  declare -A m=()
  for v in "${variants[@]}"; do m[$v]=$([[ -s "$WORK/$workload.$v" ]] && median <"$WORK/$workload.$v" || echo 0); done
  log "$workload CPU s: $(for v in "${variants[@]}"; do printf '%s %s  ' "$v" "${m[$v]}"; done)"
  if [[ $workload == bench ]]; then
    what="alloc_bench_program, 2 threads × 4 M allocations (CPU s, user + sys, the exit save included)"
  else
    what="g++ -O2 -c tools/strata/profile_model.cc (CPU s of the driver, cc1plus and as)"
  fi
  over() { calc %+.1f%% "100 * ($1 - $2) / $2"; }
  if [[ -n $BEFORE ]]; then
    echo "| native allocations: $what, the earlier build ($BEFORE) at the default R (and at 512 KiB), same rounds | ${m[before_alloc]} ($(over "${m[before_alloc]}" "${m[strata]}"); 512 KiB: $(over "${m[before_alloc_512k]}" "${m[strata]}")) | this build: ${m[strata_alloc]} (512 KiB: ${m[strata_alloc_512k]}) | $(calc %.2f "${m[strata_alloc]} / ${m[before_alloc]}")× | — | — |"
  fi
  echo "| native allocations: $what, Strata with nativeallocations at the default R (and at 512 KiB) vs Strata without it | ${m[strata_alloc]} ($(over "${m[strata_alloc]}" "${m[strata]}"); 512 KiB: $(over "${m[strata_alloc_512k]}" "${m[strata]}")) | Strata without: ${m[strata]} (plain ${m[plain]}); gperftools heap profiler ${m[gperftools_heap]} ($(over "${m[gperftools_heap]}" "${m[tcmalloc]}") over tcmalloc alone ${m[tcmalloc]}); heaptrack ${m[heaptrack]} ($(over "${m[heaptrack]}" "${m[plain]}")) | $(calc %.2f "${m[strata_alloc]} / ${m[strata]}")× | ≤ +3 % | $(awk -v a="${m[strata_alloc]}" -v b="${m[strata]}" 'BEGIN { print (a <= 1.03 * b) ? "yes" : "**no**" }') |"
done
