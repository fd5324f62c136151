#!/usr/bin/env bash
# Kernel CPU charged to the system call's caller (issue 34; docs/benchmarks.md, "Kernel CPU"):
# sqlite3 inserting ROWS rows into a tmpfs database, one transaction each
# (synchronous=OFF): ~3/4 of its CPU is in the kernel (pwrite64, fcntl locks, the journal's
# open/fstat/unlink). Interleaved rounds of: plain, preloaded with libstrata_base.so at 1 kHz
# (STRATA_STARTUP=1), `perf record -g -F 999` (kernel counted), and with STRATA_BEFORE_LIB=PATH
# also that library (e.g. one built before the charging). Per run: the process's CPU
# (user + system, /usr/bin/time); for Strata the main thread's CPU samples per CPU-second of
# its clock (samples with a CPU delta > 0, over the sum of the deltas) and the share of them
# whose stack has pwrite; for perf the same over sqlite3's samples (process CPU from time).
# strata+perf: `perf record -g -F 999` of a Strata run, both tools' pwrite shares of that one
# execution (the program's own round-to-round variation taken out: what differs is the
# tools'). sys_pct: the kernel's own system time share of the run (time's %S over %U + %S).
#
#   tools/bench/kernel_cpu_sqlite.sh [ROUNDS] [ROWS]     defaults: 3, 40000
# Build first: bazel build -c opt //base:libstrata_base.so //tests:profile_stats
# Output: one "run VARIANT ..." line per run, then "median VARIANT ..." lines.
set -uo pipefail
rounds="${1:-3}"
rows="${2:-40000}"
bin="${STRATA_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/bazel-bin}"
library="$bin/base/libstrata_base.so"
stats="$bin/tests/profile_stats"
command -v sqlite3 >/dev/null || { echo "sqlite3 is not installed (apt-get install sqlite3)" >&2; exit 1; }
dir=/dev/shm
[[ -w $dir ]] || dir=/tmp
out="$(mktemp -d)"
db="$dir/strata_kernel_cpu_bench.$$.db"
trap 'rm -rf "$out" "$db" "$db"-journal' EXIT
python3 -c "
import sys
print('PRAGMA synchronous=OFF;')
print('CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);')
for i in range(int(sys.argv[1])): print(\"INSERT INTO t(b) VALUES('row %d %s');\" % (i, 'x' * 100))
" "$rows" >"$out/insert.sql"
variants=(plain strata)
[[ -n "${STRATA_BEFORE_LIB:-}" ]] && variants+=(strata-before)
command -v perf >/dev/null && perf record -q -o "$out/probe.data" -- true >/dev/null 2>&1 &&
  variants+=(perf strata+perf)
perf_share() {  # PERF_DATA VARIANT: sqlite3's samples with pwrite in their call chain
  perf script -i "$1" -F comm,ip,sym 2>/dev/null | awk -v v="$2" -v cpu="$(cpu_of)" -v sys="$(sys_of)" '
    BEGIN { RS = "" }
    { split($0, lines, "\n"); split(lines[1], head, " "); if (head[1] != "sqlite3") next
      n++; if ($0 ~ /pwrite/) p++ }
    END { printf "run %s cpu_s=%s sys_pct=%s samples_per_cpu_s=%.0f pwrite_pct=%.2f samples=%d\n",
            v, cpu, sys, n / cpu, 100 * p / n, n }'
}
cpu_of() { awk '{ printf "%.3f", $1 + $2 }' "$out/time"; }
# The kernel's own split of the run: system time's share of user + system (per round, the
# reference a tool's kernel share is compared with).
sys_of() { awk '{ printf "%.1f", ($1 + $2 > 0) ? 100 * $2 / ($1 + $2) : 0 }' "$out/time"; }
strata_run() {  # LIBRARY VARIANT [PERF_DATA]
  rm -f "$out/p.json"
  local perf_prefix=()
  [[ -n "${3:-}" ]] && perf_prefix=(perf record -q -g -F 999 -o "$3" --)
  "${perf_prefix[@]}" /usr/bin/time -o "$out/time" -f "%U %S" env LD_PRELOAD="$1" STRATA_STARTUP=1 \
    STRATA_SHUTDOWN="$out/p.json" sqlite3 "$db" <"$out/insert.sql" >/dev/null 2>&1
  "$stats" "$out/p.json" "GeckoMain:pwrite" >"$out/stats" 2>&1
  awk -v v="$2" -v cpu="$(cpu_of)" -v sys="$(sys_of)" '
    $1 == "thread" && !t { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] } t = 1 }
    $1 == "match" { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "real_count") p = kv[2] } }
    END { printf "run %s cpu_s=%s sys_pct=%s samples_per_cpu_s=%.0f pwrite_pct=%.2f cpu_samples=%d thread_cpu_ms=%.1f\n",
            v, cpu, sys, 1000 * f["cpu_samples"] / f["cpu_all_ms"], 100 * p / f["cpu_samples"], f["cpu_samples"], f["cpu_all_ms"] }' \
    "$out/stats"
}
for ((i = 0; i < rounds; i++)); do
  for variant in "${variants[@]}"; do
    rm -f "$db" "$db"-journal
    case "$variant" in
      plain) /usr/bin/time -o "$out/time" -f "%U %S" sqlite3 "$db" <"$out/insert.sql" >/dev/null
        echo "run plain cpu_s=$(cpu_of) sys_pct=$(sys_of)" ;;
      strata) strata_run "$library" strata ;;
      strata-before) strata_run "$STRATA_BEFORE_LIB" strata-before ;;
      perf)
        perf record -q -g -F 999 -o "$out/perf.data" -- \
          /usr/bin/time -o "$out/time" -f "%U %S" sqlite3 "$db" <"$out/insert.sql" >/dev/null 2>&1
        perf_share "$out/perf.data" perf ;;
      strata+perf)
        strata_run "$library" strata+perf:strata "$out/perf.data"
        perf_share "$out/perf.data" strata+perf:perf ;;
    esac
  done
done | tee "$out/runs"
median() {  # VARIANT KEY
  awk -v v="$1" -v k="$2" '$2 == v { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' \
    "$out/runs" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
reported=()
for variant in "${variants[@]}"; do
  [[ $variant == strata+perf ]] && reported+=(strata+perf:strata strata+perf:perf) || reported+=("$variant")
done
for variant in "${reported[@]}"; do
  echo "median $variant cpu_s=$(median "$variant" cpu_s) sys_pct=$(median "$variant" sys_pct) samples_per_cpu_s=$(median "$variant" samples_per_cpu_s)" \
    "pwrite_pct=$(median "$variant" pwrite_pct) load=$(cut -d' ' -f1-3 /proc/loadavg)"
done
