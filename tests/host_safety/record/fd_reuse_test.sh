#!/usr/bin/env bash
# Issue 16, `strata record` kills the program at start: the record hook kept a pipe in the
# program's descriptor table and its watcher read whatever held that number, ending the
# program with exit(128 + byte) (status 218 in 5 of 60 runs). fd_reuse_program closes every
# descriptor above 2 at start, reopens pipes and a file on those numbers and checks every
# byte. It runs plain, preloaded, and RUNS (default 60) times under `strata record`: every run
# must end as the plain one (exit 0) with the same output, and write its profile (with
# libunwind's own pipe-based memory check, 5 of 100 saves failed with EBADF: the number of
# the save's temporary file was closed by libunwind; issue 16, first item).
source "$(dirname "$0")/../../scenario_lib.sh"
source "$(dirname "$0")/record_lib.sh"

program="$(binary tests/host_safety/record/fd_reuse_program)"
runs="${RUNS:-60}"

run_plain plain "$program" "$WORK/plain.data"
sed 's/^/    /' "$WORK/plain.out"
[[ "$(verdict plain)" == "exited 0" ]] || fail "plain: $(verdict plain) (the program itself fails)"

run_preloaded preloaded "$program" "$WORK/preloaded.data"
same_as_plain preloaded plain && pass "preloaded: $(verdict preloaded), same output as plain"

start=$(date +%s.%N)
bad=0
verdicts=""
for i in $(seq "$runs"); do
  run_recorded "record$i" "$program" "$WORK/record$i.data"
  verdicts="$verdicts$(verdict "record$i" | tr ' ' _)\n"
  if ! same_as_plain "record$i" plain; then
    bad=$((bad + 1))
  elif [[ ! -s "$OUT/record$i.json" ]]; then
    # Seen before libunwind's memory-check pipe was replaced (platform/sampling): the save's
    # temporary file took the number of that pipe and libunwind closed it (EBADF).
    fail "record$i: no profile written: $(grep -m1 'could not save' "$WORK/record$i.err")"
    bad=$((bad + 1))
  fi
  rm -f "$OUT/record$i.json" "$WORK/record$i.data"
done
seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
result "scenario=fd-reuse-record runs=$runs different=$bad seconds=$seconds ended=$(printf "$verdicts" | sort | uniq -c | awk '{ printf "%s%sx%s", sep, $1, $2; sep = "," }')"
((bad == 0)) && pass "record: $runs of $runs runs end as plain with the same output"

finish
