#!/usr/bin/env bash
# Soak (issue 10; docs/reliability.md "Soak and leaks"): tests/soak_program (16 threads busy
# and recording markers as fast as they can, linked with the base tier) profiled at 1 kHz
# with a small buffer, for 10 minutes; the process's RSS is read from /proc every second.
#
# Pass: the profile is written and passes the format checker, the program exits 0, and RSS
# stays flat under the buffer limit: after the warm-up (the first 60 s, or a tenth of a short
# run) RSS never exceeds the warm-up's RSS by more than the buffer limit (STRATA_BUFFER_MB
# here), and the median RSS of the last tenth of the run is within 8 MiB of the median of the
# tenth after the warm-up (no growth with time).
#
#   tools/soak.sh [--seconds S] [--threads N] [--buffer-mb M] [--interval-ms I]
#
# Defaults: 600 s, 16 threads, 8 MiB buffer, 1 ms. Needs the programs built (as in
# tests/README.md "Running one"):
#   bazel --output_base=... build //tests:soak_program //base:libstrata_base.so \
#     //tests/format:gecko_profile_check
#   STRATA_BIN=$(bazel --output_base=... info bazel-bin) tools/soak.sh
# Writes the RSS series to $WORK/rss.csv (seconds,rss_kib) and prints RESULT lines.
#
#   tools/soak.sh --loaded-twins [BAZEL_ARGS...]
#
# runs instead the scenarios' loaded twins tagged "soak" (tests/scenario.bzl), which CI's
# whole-suite run leaves out (tests/README.md, "Loaded twins in soak"), ending with the plain
# line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--loaded-twins" ]]; then
  shift
  tools/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
  log=$(mktemp /tmp/strata-soak.XXXXXX)
  trap 'rm -f "$log"' EXIT
  bazel test //... --keep_going --test_summary=short --build_tests_only --test_tag_filters=soak "$@" 2>&1 | tee "$log"
  bazel_rc=${PIPESTATUS[0]}
  passed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?PASSED' "$log")
  failed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' "$log")
  if [[ $bazel_rc -ne 0 && $failed -eq 0 ]]; then failed=1; fi
  echo "${passed} passed, ${failed} failed"
  [[ $failed -eq 0 ]]
  exit
fi
bin="${STRATA_BIN:-bazel-bin}"
seconds=600
threads=16
buffer_mb=8
interval_ms=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --buffer-mb) buffer_mb="$2"; shift 2 ;;
    --interval-ms) interval_ms="$2"; shift 2 ;;
    *) echo "usage: $0 [--seconds S] [--threads N] [--buffer-mb M] [--interval-ms I]"; exit 2 ;;
  esac
done
program="$bin/tests/soak_program"
checker="$bin/tests/format/gecko_profile_check"
for f in "$program" "$checker"; do
  [[ -x "$f" ]] || { echo "missing $f (build it first, see the header)"; exit 2; }
done
WORK=$(mktemp -d /tmp/strata-soak.XXXXXX)
echo "soak: ${seconds}s, $threads threads, ${interval_ms} ms, buffer ${buffer_mb} MiB; files in $WORK"

STRATA_STARTUP=1 STRATA_STARTUP_INTERVAL="$interval_ms" STRATA_STARTUP_BUFFER_MB="$buffer_mb" \
  STRATA_SHUTDOWN="$WORK/soak.json" LD_LIBRARY_PATH="$bin/base" \
  "$program" --seconds "$seconds" --threads "$threads" >"$WORK/soak.out" 2>"$WORK/soak.err" &
pid=$!
start=$(date +%s.%N)
: >"$WORK/rss.csv"
while kill -0 "$pid" 2>/dev/null; do
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
  now=$(date +%s.%N)
  [[ -n "$rss" ]] && echo "$(awk -v a="$start" -v b="$now" 'BEGIN { printf "%.1f", b - a }'),$rss" >>"$WORK/rss.csv"
  sleep 1
done
wait "$pid"
status=$?
wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
[[ $status -eq 0 ]] || fail "soak_program exited with status $status: $(tail -3 "$WORK/soak.err")"
if [[ -s "$WORK/soak.json" ]] && "$checker" --max-per-code=3 "$WORK/soak.json" >"$WORK/check" 2>&1; then
  echo "ok: profile $(du -k "$WORK/soak.json" | cut -f1) KiB, $(tail -1 "$WORK/check")"
else
  fail "no valid profile: $(tail -3 "$WORK/check" 2>/dev/null)"
fi
# The RSS verdict (awk over the series; the capture at exit is not part of the steady state,
# so the series stops at the program's own end: samples after `seconds` are left out).
awk -F, -v run="$seconds" -v limit_kib=$((buffer_mb * 1024)) -v verdict="$WORK/verdict" '
  { t[NR] = $1; r[NR] = $2 }
  function median(lo, hi,   n, i, a, j, tmp) {
    n = 0
    for (i = 1; i <= NR; i++) if (t[i] >= lo && t[i] < hi) a[++n] = r[i]
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { tmp = a[i]; a[i] = a[j]; a[j] = tmp }
    return n ? a[int((n + 1) / 2)] : -1
  }
  END {
    warm = run >= 600 ? 60 : run / 10
    tenth = run / 10
    base = median(warm - 5, warm + 1)
    peak = 0
    for (i = 1; i <= NR; i++) if (t[i] >= warm && t[i] <= run && r[i] > peak) peak = r[i]
    early = median(warm, warm + tenth)
    late = median(run - tenth, run)
    printf "RESULT soak samples=%d warmup_s=%d rss_at_warmup_kib=%d peak_after_warmup_kib=%d early_median_kib=%d late_median_kib=%d growth_kib=%d buffer_limit_kib=%d\n", NR, warm, base, peak, early, late, late - early, limit_kib
    ok = (base > 0 && peak - base <= limit_kib && late - early <= 8192 && late - early >= -65536)
    print (ok ? "ok" : "fail") > verdict
  }' "$WORK/rss.csv"
if [[ "$(cat "$WORK/verdict")" == ok ]]; then
  echo "ok: RSS flat under the buffer limit"
else
  fail "RSS grew (see RESULT above and $WORK/rss.csv)"
fi
echo "RESULT soak wall_s=$wall status=$status $(grep '^soak_program: result' "$WORK/soak.out" | sed 's/^soak_program: result //')"
echo "soak: $failures failure(s)"
[[ $failures -eq 0 ]]
