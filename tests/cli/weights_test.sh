#!/usr/bin/env bash
# Wall and CPU weights in `strata summary`, `convert` and `report` (issue 18, "Views";
# docs/cli.md, "Weights") on a real program: sleep_and_spin's "sleeper" thread waits 600 ms
# in sleeper_wait while its "spinner" burns 300 ms of CPU in spinner_burn. Recorded in
# precise mode (wall-clock timers: blocked threads are sampled, their samples carry CPU delta
# 0), so the test does not depend on wait stacks of the default mode.
#   - the program's status and output lines are those of its plain run (plain, preloaded,
#     recorded);
#   - summary: the sleeper's wall ms is its measured wait (within -10/+15 %) and its CPU ms
#     about 0; the spinner's CPU ms is its measured CPU (within 10 %) and its wall ms its
#     measured run time; sleeper_wait's total wall is the sleeper's, its total CPU about 0;
#     the wait's leaf (clock_nanosleep) has that wall time as self time and no CPU; the
#     function tables are sorted by wall time, or by CPU time (spinner_burn first) with
#     --weight cpu;
#   - --weight bogus: exit status 2, the accepted values named;
#   - pprof: sample types samples/count, wall/nanoseconds, cpu/nanoseconds, default wall (cpu
#     with --weight cpu); the sleeper's pprof wall and CPU are the summary's; read again by
#     `go tool pprof` where Go is installed;
#   - collapsed --weight wall: the sleeper's lines sum to its wall time in µs;
#   - report: the weight control, and the weight it opens with.
# Ratios only, no timing goal: the same checks hold loaded (weights_loaded_test).
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
PROGRAM="$(binary tests/cli/sleep_and_spin)"
PPROF_CHECK="$(binary tests/cli/pprof_check)"
export STRATA_BASE_LIB="$STRATA_LIB"
export STRATA_NO_PROGRESS=1
ARGS=(--sleep-ms 600 --spin-ms 300)

# measured RUN THREAD KEY: the program's own figure (wall_ms, cpu_ms) for THREAD.
measured() { sed -n "s/^thread=$2 .*\b$3=\([0-9.]*\).*/\1/p" "$WORK/$1.out" | head -1; }
# within VALUE REFERENCE LOW HIGH: LOW * REFERENCE <= VALUE <= HIGH * REFERENCE.
within() { awk -v v="$1" -v r="$2" -v lo="$3" -v hi="$4" 'BEGIN { exit !(v != "" && r > 0 && v >= lo * r && v <= hi * r) }'; }
shape() { sed 's/=[0-9.]*/=N/g' "$WORK/$1.out"; }

# --- The program three ways ------------------------------------------------------------------
timeout 60 "$PROGRAM" "${ARGS[@]}" >"$WORK/plain.out" 2>"$WORK/plain.err"
plain_status=$?
STRATA_STARTUP_FEATURES=precise run_profiled preloaded timeout 60 "$PROGRAM" "${ARGS[@]}"
preloaded_status=$RUN_STATUS
timeout 120 env "${SANITIZER_ENV[@]}" "$STRATA" record --features precise -o "$OUT/run.json" -- "$PROGRAM" "${ARGS[@]}" \
  >"$WORK/run.out" 2>"$WORK/run.err"
run_status=$?
cp "$WORK/run.out" "$WORK/run.err" "$OUT/" 2>/dev/null || true
if [[ $plain_status == 0 && $preloaded_status == 0 && $run_status == 0 ]] &&
  [[ "$(shape plain)" == "$(shape preloaded)" && "$(shape plain)" == "$(shape run)" ]]; then
  pass "plain, preloaded and recorded: status 0, the same output lines"
else
  fail "statuses plain=$plain_status preloaded=$preloaded_status recorded=$run_status, or the output differs"
  sed 's/^/    /' "$WORK/plain.out" "$WORK/preloaded.out" "$WORK/run.out" "$WORK/run.err"
fi
for run in plain preloaded run; do
  ge "$(measured $run sleeper wall_ms)" 600 && pass "$run: the sleeper's wait is whole ($(measured $run sleeper wall_ms) ms)" \
    || fail "$run: the sleeper waited $(measured $run sleeper wall_ms) ms, asked 600"
done
sleeper_wall=$(measured run sleeper wall_ms)
spinner_wall=$(measured run spinner wall_ms)
spinner_cpu=$(measured run spinner cpu_ms)
result "measured sleeper_wall_ms=$sleeper_wall spinner_wall_ms=$spinner_wall spinner_cpu_ms=$spinner_cpu"

# --- summary: wall and CPU columns -----------------------------------------------------------
"$STRATA" summary "$OUT/run.json" --top 40 >"$WORK/summary.txt" 2>"$WORK/summary.err"
summary_status=$?
sed 's/^/    /' "$WORK/summary.txt" | head -16
[[ $summary_status == 0 ]] || fail "summary exited $summary_status: $(cat "$WORK/summary.err")"
# Threads table: pid tid name samples wall CPU CPU%.
thread_column() { awk -v name="$1" -v col="$2" '/^Threads:/ { t = 1; next } t && /^$/ { t = 0 } t && $3 == name { print $col; exit }' "$WORK/summary.txt"; }
s_wall=$(thread_column sleeper 5)
s_cpu=$(thread_column sleeper 6)
b_wall=$(thread_column spinner 5)
b_cpu=$(thread_column spinner 6)
result "summary sleeper_wall_ms=$s_wall sleeper_cpu_ms=$s_cpu spinner_wall_ms=$b_wall spinner_cpu_ms=$b_cpu"
grep -q "wall ms      CPU ms" "$WORK/summary.txt" && pass "summary: wall and CPU columns" \
  || fail "summary: no wall and CPU columns"
within "$s_wall" "$sleeper_wall" 0.9 1.15 && pass "summary: the sleeper's wall time $s_wall ms is its wait ($sleeper_wall ms)" \
  || fail "summary: the sleeper's wall time ${s_wall:-none} ms, measured wait $sleeper_wall ms"
awk -v c="$s_cpu" -v w="$s_wall" 'BEGIN { exit !(c != "" && c <= 0.05 * w && c < 10) }' \
  && pass "summary: the sleeper's CPU time is about 0 ($s_cpu ms)" || fail "summary: the sleeper's CPU time ${s_cpu:-none} ms"
within "$b_cpu" "$spinner_cpu" 0.9 1.1 && pass "summary: the spinner's CPU time $b_cpu ms is its CPU ($spinner_cpu ms)" \
  || fail "summary: the spinner's CPU time ${b_cpu:-none} ms, measured $spinner_cpu ms"
within "$b_wall" "$spinner_wall" 0.9 1.15 && ge "$b_wall" "$(awk -v c="$b_cpu" 'BEGIN { print 0.9 * c }')" \
  && pass "summary: the spinner's wall time $b_wall ms is its run time ($spinner_wall ms, CPU $b_cpu ms)" \
  || fail "summary: the spinner's wall time ${b_wall:-none} ms, measured run time $spinner_wall ms"
# sleeper_wait in the total table: self wall, self CPU, self %, total wall, total CPU, ...
total_row=$(awk '/^Top functions by total/ { t = 1; next } t && /sleeper_wait/ { print; exit }' "$WORK/summary.txt")
f_wall=$(awk '{ print $4 }' <<<"$total_row")
f_cpu=$(awk '{ print $5 }' <<<"$total_row")
result "summary sleeper_wait_total_wall_ms=$f_wall sleeper_wait_total_cpu_ms=$f_cpu"
within "$f_wall" "$s_wall" 0.9 1.0001 && awk -v c="$f_cpu" 'BEGIN { exit !(c != "" && c < 10) }' \
  && pass "summary: sleeper_wait's total wall time $f_wall ms, CPU $f_cpu ms" \
  || fail "summary: sleeper_wait's total row: '$total_row'"
# The self table: sorted by wall (column 1) by default, by CPU (column 2) with --weight cpu;
# the wait's row (clock_nanosleep, the leaf) has the sleeper's wall time and no CPU.
sorted_by() {  # FILE COLUMN: the self table's rows are in descending order of COLUMN.
  awk -v col="$2" '/^Top functions by self/ { t = 1; getline; next } t && /^$/ { exit } t {
    if (n++ && $col > last + 1e-9) bad = 1; last = $col } END { exit !(n >= 3 && !bad) }' "$1"
}
first_self() { awk '/^Top functions by self/ { t = 1; getline; next } t { print; exit }' "$1"; }
wait_row=$(awk '/^Top functions by self/ { t = 1; next } t && /clock_nanosleep/ { print; exit }' "$WORK/summary.txt")
w_wall=$(awk '{ print $1 }' <<<"$wait_row")
w_cpu=$(awk '{ print $2 }' <<<"$wait_row")
within "$w_wall" "$s_wall" 0.9 1.0001 && awk -v c="$w_cpu" 'BEGIN { exit !(c != "" && c < 10) }' \
  && pass "summary: the wait's leaf clock_nanosleep: self wall $w_wall ms, self CPU $w_cpu ms" \
  || fail "summary: clock_nanosleep's self row: '$wait_row'"
sorted_by "$WORK/summary.txt" 1 && grep -q "sorted by wall time" "$WORK/summary.txt" \
  && pass "summary: the self table is sorted by wall time" || fail "summary: the self table is not sorted by wall time"
"$STRATA" summary "$OUT/run.json" --top 40 --weight cpu >"$WORK/summary.cpu.txt" 2>&1
sorted_by "$WORK/summary.cpu.txt" 2 && first_self "$WORK/summary.cpu.txt" | grep -q "spinner_burn" \
  && grep -q "sorted by CPU time" "$WORK/summary.cpu.txt" \
  && pass "summary --weight cpu: sorted by CPU time, spinner_burn first" \
  || fail "summary --weight cpu: first row '$(first_self "$WORK/summary.cpu.txt")'"

# --- Bad weights -----------------------------------------------------------------------------
for command in "summary $OUT/run.json" "report $OUT/run.json -o $WORK/x.html" "convert $OUT/run.json --to pprof -o $WORK/x"; do
  # shellcheck disable=SC2086
  "$STRATA" $command --weight bogus >/dev/null 2>"$WORK/bad.err"
  status=$?
  [[ $status == 2 ]] && grep -q "unknown weight 'bogus' (accepted: wall, cpu, samples, bytes, retained)" "$WORK/bad.err" \
    && pass "${command%% *} --weight bogus: status 2, the accepted values named" \
    || fail "${command%% *} --weight bogus: status $status: $(cat "$WORK/bad.err")"
done
# bytes and retained (native allocations, docs/memory.md) weigh a profile's allocations: on a
# profile without any, report and convert refuse with what to do (status 1).
for command in "report $OUT/run.json -o $WORK/x.html" "convert $OUT/run.json --to pprof -o $WORK/x"; do
  # shellcheck disable=SC2086
  "$STRATA" $command --weight bytes >/dev/null 2>"$WORK/bad.err"
  status=$?
  [[ $status == 1 ]] && grep -q "has no native allocations (record with --features nativeallocations)" "$WORK/bad.err" \
    && pass "${command%% *} --weight bytes without allocations: status 1, what to do" \
    || fail "${command%% *} --weight bytes: status $status: $(cat "$WORK/bad.err")"
done

# --- pprof -----------------------------------------------------------------------------------
"$STRATA" convert "$OUT/run.json" --to pprof -o "$OUT/run.pb.gz" 2>"$WORK/pprof.err" || fail "convert pprof: $(cat "$WORK/pprof.err")"
"$PPROF_CHECK" "$OUT/run.pb.gz" >"$WORK/pprof.check" || fail "pprof: $(cat "$WORK/pprof.check")"
grep '^pprof\b\|^pprof_totals\|^pprof_thread' "$WORK/pprof.check" | sed 's/^/    /'
grep -q "sample_types=samples/count,wall/nanoseconds,cpu/nanoseconds$" "$WORK/pprof.check" \
  && grep -q "^pprof_totals default=wall " "$WORK/pprof.check" \
  && pass "pprof: samples/count, wall/nanoseconds and cpu/nanoseconds, default wall" \
  || fail "pprof: sample types or default: $(head -2 "$WORK/pprof.check")"
p_wall=$(sed -n 's/^pprof_thread thread=sleeper .*wall\/nanoseconds=\([0-9]*\).*/\1/p' "$WORK/pprof.check")
p_cpu=$(sed -n 's/^pprof_thread thread=sleeper .*cpu\/nanoseconds=\([0-9]*\).*/\1/p' "$WORK/pprof.check")
result "pprof sleeper_wall_ns=$p_wall sleeper_cpu_ns=$p_cpu"
awk -v p="$p_wall" -v s="$s_wall" -v c="$p_cpu" 'BEGIN { exit !(p != "" && (p / 1e6 - s) ^ 2 < 0.01 && c / 1e6 < 10) }' \
  && pass "pprof: the sleeper's wall ($p_wall ns) is the summary's, its CPU about 0 ($p_cpu ns)" \
  || fail "pprof: the sleeper's wall ${p_wall:-none} ns, CPU ${p_cpu:-none} ns (summary: $s_wall ms)"
"$STRATA" convert "$OUT/run.json" --to pprof --weight cpu -o "$WORK/cpu.pb.gz" 2>/dev/null
"$PPROF_CHECK" "$WORK/cpu.pb.gz" | grep -q "^pprof_totals default=cpu " && pass "pprof --weight cpu: default cpu" \
  || fail "pprof --weight cpu: default type"
# go tool pprof (Debian golang-go, installed by tools/setup.sh) reads it with no warning; its
# Mappings (issue 34) name the program's file and build id, so pprof can symbolize again.
if command -v go >/dev/null; then
  HOME="$WORK" timeout 120 go tool pprof -raw "$OUT/run.pb.gz" >"$WORK/go_pprof.txt" 2>&1
  grep -q "^samples/count wall/nanoseconds\[dflt\] cpu/nanoseconds$" "$WORK/go_pprof.txt" \
    && grep -q "thread:\[sleeper\]" "$WORK/go_pprof.txt" && pass "go tool pprof reads it: samples, wall (default), cpu" \
    || { fail "go tool pprof"; head -20 "$WORK/go_pprof.txt" | sed 's/^/    /'; }
  HOME="$WORK" timeout 120 go tool pprof -top "$OUT/run.pb.gz" >"$WORK/go_top.txt" 2>&1
  program_id=$(readelf -n "$PROGRAM" 2>/dev/null | sed -n 's/.*Build ID: //p' | head -1)
  if grep -qi "warning\|not available\|error" "$WORK/go_top.txt"; then
    fail "go tool pprof -top warns: $(grep -i "warning\|not available\|error" "$WORK/go_top.txt" | head -3)"
  elif grep -q "^File: $(basename "$PROGRAM")$" "$WORK/go_top.txt" \
      && sed -n '/^Mappings/,$p' "$WORK/go_pprof.txt" | grep -qF "$(readlink -f "$PROGRAM") ${program_id:-NO-BUILD-ID}"; then
    pass "go tool pprof: no warning; a mapping names $(basename "$PROGRAM") with its build id"
  else
    fail "go tool pprof: no mapping of the program with its build id ($program_id)"
    head -5 "$WORK/go_top.txt" | sed 's/^/    /'
    sed -n '/^Mappings/,$p' "$WORK/go_pprof.txt" | head -5 | sed 's/^/    /'
  fi
else
  fail "no Go toolchain: go tool pprof (Debian golang-go, tools/setup.sh) is needed"
fi

# --- collapsed --weight wall ------------------------------------------------------------------
"$STRATA" convert "$OUT/run.json" --to collapsed --weight wall -o "$OUT/run.wall.collapsed" 2>/dev/null \
  || fail "convert collapsed --weight wall"
c_wall=$(awk '$0 ~ /;sleeper \([0-9]+\)/ { s += $NF } END { print s / 1000 }' "$OUT/run.wall.collapsed")
awk -v c="$c_wall" -v s="$s_wall" 'BEGIN { exit !(c > 0 && (c - s) ^ 2 < 0.01) }' \
  && pass "collapsed --weight wall: the sleeper's lines sum to its wall time ($c_wall ms)" \
  || fail "collapsed --weight wall: the sleeper's lines sum to $c_wall ms, summary $s_wall ms"

# --- report ------------------------------------------------------------------------------------
"$STRATA" report "$OUT/run.json" -o "$OUT/run.html" 2>"$WORK/report.err" || fail "report: $(cat "$WORK/report.err")"
"$STRATA" report "$OUT/run.json" --weight cpu -o "$WORK/cpu.html" 2>>"$WORK/report.err"
grep -q '<select id="weight"' "$OUT/run.html" && grep -q '"weight":"wall"' "$OUT/run.html" \
  && grep -q '"weight":"cpu"' "$WORK/cpu.html" && pass "report: the weight control, opening on wall (cpu with --weight cpu)" \
  || fail "report: no weight control or weight"

finish
