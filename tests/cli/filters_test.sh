#!/usr/bin/env bash
# Filters of `strata summary`, `convert`, `report` and `view` (issue 39; docs/cli.md,
# "Filters") on a real recorded profile: marked_program's threads "renderer" (Frame interval
# markers), "io-worker" (Read start/end pairs) and its main thread, recorded with `strata record`.
#   - the program's status and output are those of its plain run;
#   - --thread, --tid, --pid, --process: the threads kept, each with the sample count the
#     unfiltered summary gives it; "Filtered: ..." names the filters;
#   - --range A,M and --range M, partition a thread's samples; --range Frame counts as many
#     markers as the unfiltered summary's Markers table has and keeps fewer samples than all;
#   - convert --to collapsed --thread renderer: only renderer lines, summing to its samples;
#   - report --thread renderer: no io-worker in the page;
#   - view --thread renderer: serves a profile with only that thread, which the format checker
#     and the front-end's importer take;
#   - bad values exit 2 with a message naming what is accepted or what the profile has.
# Counts compared with counts of the same run, no timing: the same checks hold loaded.
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
PROGRAM="$(binary tests/cli/marked_program)"
export STRATA_BASE_LIB="$STRATA_LIB"
export STRATA_NO_PROGRESS=1

timeout 60 "$PROGRAM" --ms 200 >"$WORK/plain.out" 2>&1
plain_status=$?
timeout 120 env "${SANITIZER_ENV[@]}" "$STRATA" record -q -o "$OUT/run.json" -- "$PROGRAM" --ms 200 \
  >"$WORK/run.out" 2>"$WORK/run.err"
run_status=$?
if [[ $plain_status == 0 && $run_status == 0 ]] && diff -q "$WORK/plain.out" "$WORK/run.out" >/dev/null; then
  pass "plain and recorded: status 0, the same output"
else
  fail "plain status $plain_status, recorded $run_status, or the output differs"
  sed 's/^/    /' "$WORK/plain.out" "$WORK/run.out" "$WORK/run.err"
fi

# summary NAME ARGS...: `strata summary run.json ARGS` into $WORK/NAME.txt; sets STATUS.
summary() {
  local name="$1"
  shift
  "$STRATA" summary "$OUT/run.json" --top 5 "$@" >"$WORK/$name.txt" 2>"$WORK/$name.err"
  STATUS=$?
}
# threads NAME: "name:samples" of the Threads table, one per line, sorted.
threads() {
  awk '/^Threads:/ { t = 1; getline; next } t && /^$/ { t = 0 } t { print $3 ":" $4 }' "$WORK/$1.txt" | sort
}
# thread_field NAME THREAD COLUMN: a column of THREAD's row in the Threads table.
thread_field() {
  awk -v n="$2" -v c="$3" '/^Threads:/ { t = 1; next } t && /^$/ { t = 0 } t && $3 == n { print $c; exit }' "$WORK/$1.txt"
}

summary all
[[ $STATUS == 0 ]] || fail "summary exited $STATUS: $(cat "$WORK/all.err")"
sed 's/^/    /' "$WORK/all.txt" | head -14
renderer_samples=$(thread_field all renderer 4)
renderer_tid=$(thread_field all renderer 2)
pid=$(thread_field all renderer 1)
worker_samples=$(thread_field all io-worker 4)
frames=$(awk '/^Markers:/ { m = 1; next } m && $1 == "Frame" { print $2; exit }' "$WORK/all.txt")
result "renderer_samples=$renderer_samples io_worker_samples=$worker_samples frame_markers=$frames"
[[ -n "$renderer_samples" && -n "$worker_samples" && "$renderer_samples" -gt 0 && -n "$frames" ]] \
  || fail "the unfiltered summary lacks the renderer, io-worker or Frame markers"
grep -q '^Filtered:' "$WORK/all.txt" && fail "summary without filters says 'Filtered:'"

# --- Threads and processes ------------------------------------------------------------------
summary thread --thread renderer
[[ $STATUS == 0 && "$(threads thread)" == "renderer:$renderer_samples" ]] \
  && pass "--thread renderer: only renderer, its $renderer_samples samples" \
  || fail "--thread renderer: status $STATUS, threads $(threads thread | tr '\n' ' ')"
grep -q "^Filtered: thread 'renderer': 1 of 3 threads, 1 of 1 processes, $renderer_samples of " "$WORK/thread.txt" \
  && pass "--thread: the summary says which filter applied" \
  || fail "--thread: no or wrong 'Filtered:' line: $(grep Filtered "$WORK/thread.txt")"
summary glob --thread '*-worker' --thread 'rend*'
[[ "$(threads glob)" == "$(printf 'io-worker:%s\nrenderer:%s' "$worker_samples" "$renderer_samples")" ]] \
  && pass "--thread globs, repeated: io-worker and renderer" || fail "--thread globs: $(threads glob | tr '\n' ' ')"
summary tid --tid "$renderer_tid"
[[ "$(threads tid)" == "renderer:$renderer_samples" ]] && pass "--tid $renderer_tid: the renderer" \
  || fail "--tid: $(threads tid | tr '\n' ' ')"
summary pid --pid "$pid" --process 'marked_*'
[[ "$(threads pid)" == "$(threads all)" ]] && pass "--pid and --process of the program: every thread" \
  || fail "--pid/--process: $(threads pid | tr '\n' ' ')"

# --- Ranges ---------------------------------------------------------------------------------
duration=$(awk '/^Profile of/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "ms,") { print $i; exit } }' "$WORK/all.txt")
middle=$(awk -v d="$duration" 'BEGIN { printf "%.4f", d / 2 + 0.00005 }')
summary first --thread renderer --range "0,$middle"
first=$(thread_field first renderer 4)
summary second --thread renderer --range "$middle,"
second=$(thread_field second renderer 4)
result "range 0,$middle: $first samples; $middle,: $second samples"
awk -v a="${first:-0}" -v b="${second:-0}" -v t="$renderer_samples" 'BEGIN { exit !(a > 0 && b > 0 && (a + b == t || a + b == t + 1)) }' \
  && pass "--range 0,M and M, split the renderer's samples ($first + $second of $renderer_samples)" \
  || fail "--range halves: $first + $second, the thread has $renderer_samples"
summary frames --thread renderer --range Frame
in_frames=$(thread_field frames renderer 4)
grep -q "range 'Frame' ($frames markers" "$WORK/frames.txt" && [[ -n "$in_frames" && "$in_frames" -gt 0 && "$in_frames" -le "$renderer_samples" ]] \
  && pass "--range Frame: the $frames Frame markers, $in_frames of $renderer_samples samples" \
  || fail "--range Frame: $(grep Filtered "$WORK/frames.txt"), $in_frames samples"

# --- convert, report ------------------------------------------------------------------------
"$STRATA" convert "$OUT/run.json" --to collapsed --thread renderer -o "$OUT/renderer.collapsed" 2>"$WORK/convert.err"
status=$?
lines=$(wc -l <"$OUT/renderer.collapsed")
others=$(grep -vc "^marked_program ($pid);renderer ($renderer_tid)" "$OUT/renderer.collapsed")
sum=$(awk '{ s += $NF } END { print s + 0 }' "$OUT/renderer.collapsed")
[[ $status == 0 && $lines -gt 0 && $others == 0 && $sum == "$renderer_samples" ]] \
  && pass "convert --to collapsed --thread renderer: $lines renderer lines summing to its $sum samples" \
  || fail "convert --thread: status $status, $others other lines, sum $sum of $renderer_samples"
grep -q "Filtered: thread 'renderer'" "$WORK/convert.err" && pass "convert says which filter applied" \
  || fail "convert: $(cat "$WORK/convert.err")"
"$STRATA" report "$OUT/run.json" --thread renderer -o "$OUT/renderer.html" 2>"$WORK/report.err"
status=$?
[[ $status == 0 ]] && grep -q 'renderer' "$OUT/renderer.html" && ! grep -q 'io-worker' "$OUT/renderer.html" \
  && pass "report --thread renderer: the renderer and no io-worker in the page" \
  || fail "report --thread: status $status, $(cat "$WORK/report.err")"

# --- view -----------------------------------------------------------------------------------
"$STRATA" view --no-open --port 0 --thread renderer --range Frame "$OUT/run.json" >"$WORK/view.out" 2>"$WORK/view.err" &
view_pid=$!
for ((i = 0; i < 300; i++)); do
  grep -q '^Open: ' "$WORK/view.out" 2>/dev/null && break
  sleep 0.1
done
profile_url=$(awk '/^Profile: /{print $2}' "$WORK/view.out")
if [[ -n "$profile_url" ]] && curl -sf -o "$OUT/viewed.json" "$profile_url"; then
  if stats viewed; then
    viewed_threads=$(field viewed profile "" threads)
    viewed_samples=$(field viewed thread name=renderer samples)
    [[ "$viewed_threads" == 1 && "$viewed_samples" == "$in_frames" ]] \
      && pass "view --thread renderer --range Frame: serves 1 thread with the summary's $in_frames samples" \
      || fail "view: $viewed_threads threads, renderer $viewed_samples samples (summary: $in_frames)"
    check_format viewed
    check_frontend viewed
  fi
else
  fail "view: no profile served: $(cat "$WORK/view.out" "$WORK/view.err")"
fi
kill -INT "$view_pid" 2>/dev/null
wait "$view_pid"

# --- Bad values: status 2 and a message -------------------------------------------------------
# refused NAME PATTERN ARGS...: summary ARGS exits 2 with PATTERN on stderr.
refused() {
  local name="$1" pattern="$2"
  shift 2
  summary "$name" "$@"
  if [[ $STATUS == 2 ]] && grep -q -- "$pattern" "$WORK/$name.err"; then
    pass "summary $*: status 2, '$(head -1 "$WORK/$name.err" | cut -c1-110)'"
  else
    fail "summary $*: status $STATUS, stderr: $(cat "$WORK/$name.err")"
  fi
}
refused bad_pid "not a process or thread id" --pid abc
refused no_pid "the profile has pids $pid" --pid 1
refused no_thread "threads marked_program, renderer, io-worker" --thread 'nothing*'
refused reversed "END must be after START" --range 50,20
refused negative "0 or more" --range -5,20
refused no_marker "the profile's markers: Frame, Read, Tick" --range Paint
refused instant "instant" --range Tick
"$STRATA" convert "$OUT/run.json" --to collapsed --range 5,2 -o "$WORK/x" 2>"$WORK/convert_bad.err"
[[ $? == 2 ]] && pass "convert --range 5,2: status 2" || fail "convert --range 5,2: $(cat "$WORK/convert_bad.err")"
"$STRATA" view --no-open --port 0 --pid 1 "$OUT/run.json" >"$WORK/view_bad.out" 2>"$WORK/view_bad.err"
[[ $? == 2 ]] && pass "view --pid 1: status 2 before serving" || fail "view --pid 1: $(cat "$WORK/view_bad.err")"

finish
