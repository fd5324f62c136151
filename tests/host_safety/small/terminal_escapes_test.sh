#!/usr/bin/env bash
# Issue 16, "strata summary writes thread names' escape sequences to the terminal unfiltered":
# every string the strata command prints from a profile has its control characters escaped.
#   1. A real program (escape_thread_name) names a thread "ESC]0;X BEL ESC[2J" and is
#      profiled twice: preloaded (STRATA_STARTUP=1) and under `strata record`. Its output and
#      exit status match the plain run; `strata summary` of each profile prints the name
#      escaped (\x1b]0;X\x07\x1b[2J), with no raw control byte but newline.
#   2. A hand-made profile with C0, DEL and C1 controls (ESC sequences, BEL, CR, BS, NUL-free
#      JSON escapes, U+009B CSI) in its product, process, thread, function, library and marker
#      names: `strata summary`, `strata convert --to collapsed -o -` and the error message of
#      a broken copy (which quotes the thread name) contain no raw control byte.
# Raw control bytes are counted by raw_controls (C0 but newline, DEL, C1 in UTF-8 or alone).
source "$(dirname "$0")/../../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
program="$(binary tests/host_safety/small/escape_thread_name)"
RAW_CONTROLS="$(binary tests/host_safety/small/raw_controls)"
export STRATA_NO_PROGRESS=1
iterations=150000000

# no_raw_controls NAME FILE...: FILEs hold no raw control character.
no_raw_controls() {
  local name="$1"
  shift
  local report
  if report=$("$RAW_CONTROLS" "$@"); then
    pass "$name: no raw control character ($(tr '\n' ' ' <<<"$report"))"
  else
    fail "$name: $report"
  fi
}

# --- 1. A real program's thread name.
timeout 120 "$program" "$iterations" >"$WORK/plain.out" 2>"$WORK/plain.err"
plain_status=$?
run_profiled preloaded "$program" "$iterations"
[[ "$RUN_STATUS" -eq "$plain_status" ]] && cmp -s "$WORK/plain.out" "$WORK/preloaded.out" &&
  pass "preloaded: same exit status ($RUN_STATUS) and output as the plain run" ||
  fail "preloaded: exit status $RUN_STATUS (plain $plain_status) or output differs"
timeout 120 env "${SANITIZER_ENV[@]}" "$STRATA" record -q -o "$OUT/recorded.json" -- "$program" "$iterations" \
  >"$WORK/recorded.out" 2>"$WORK/recorded.err"
record_status=$?
[[ "$record_status" -eq "$plain_status" ]] && cmp -s "$WORK/plain.out" "$WORK/recorded.out" &&
  pass "strata record: same exit status ($record_status) and output as the plain run" ||
  fail "strata record: exit status $record_status (plain $plain_status) or output differs"
for name in preloaded recorded; do
  if [[ ! -s "$OUT/$name.json" ]]; then
    fail "$name: no profile"
    continue
  fi
  timeout 60 "$STRATA" summary "$OUT/$name.json" >"$WORK/$name.summary" 2>"$WORK/$name.summary.err"
  status=$?
  [[ "$status" -eq 0 ]] || fail "$name: strata summary exited $status"
  no_raw_controls "$name summary" "$WORK/$name.summary" "$WORK/$name.summary.err"
  grep -qF '\x1b]0;X\x07\x1b[2J' "$WORK/$name.summary" &&
    pass "$name: the thread name is shown escaped" ||
    fail "$name: the escaped thread name is not in the summary: $(grep -A3 '^Threads' "$WORK/$name.summary" | cat -v)"
done

# --- 2. A hand-made profile with controls everywhere.
evil='\u001b]0;pwned\u0007\u001b[2J\u001b[31m\u009b1A\r\b\u007f\u0001\u0085'
profile() {  # profile STACK_FRAME: the profile, its second stack pointing at frame STACK_FRAME.
  cat <<JSON
{"meta":{"version":27,"interval":1,"startTime":1000,"processType":0,"product":"prod$evil",
"categories":[{"name":"Other","color":"grey","subcategories":["Other"]}]},
"libs":[{"name":"lib$evil.so","path":"/lib$evil.so","debugName":"lib$evil.so","debugPath":"/x","breakpadId":"0","arch":"x86_64","start":4096,"end":8192,"offset":0}],
"threads":[{"name":"thread$evil","pid":"1","tid":1,"processName":"proc$evil","registerTime":0,
"stringTable":["main (in lib\u001b[31m.so)","func$evil","Marker$evil"],
"frameTable":{"schema":{"location":0,"relevantForJS":1,"innerWindowID":2,"implementation":3,"line":4,"column":5,"category":6,"subcategory":7},
"data":[[0,false,0,null,null,null,0,0],[1,false,0,null,7,null,0,0]]},
"stackTable":{"schema":{"prefix":0,"frame":1},"data":[[null,0],[0,$1]]},
"samples":{"schema":{"stack":0,"time":1,"threadCPUDelta":2},"data":[[1,0,0],[1,1,1000],[1,2,1000]]},
"markers":{"schema":{"name":0,"startTime":1,"endTime":2,"phase":3,"category":4,"data":5},
"data":[[2,0,1,1,0,null],[2,1.5,null,0,0,null]]}}],"processes":[]}
JSON
}
profile 1 >"$WORK/evil.json"
profile 9 >"$WORK/broken.json"

timeout 60 "$STRATA" summary "$WORK/evil.json" >"$WORK/evil.summary" 2>"$WORK/evil.summary.err"
status=$?
[[ "$status" -eq 0 ]] && pass "hand-made: strata summary exited 0" || fail "hand-made: strata summary exited $status"
no_raw_controls "hand-made summary" "$WORK/evil.summary" "$WORK/evil.summary.err"
for expected in 'prod\x1b]0;pwned\x07' 'thread\x1b]0;pwned' 'func\x1b]0;pwned' '[lib\x1b[31m.so]' \
  'Marker\x1b]0;pwned' '\u009b1A\x0d\x08\x7f\x01\u0085'; do
  grep -qF -- "$expected" "$WORK/evil.summary" && pass "hand-made summary shows $expected" ||
    fail "hand-made summary does not show $expected"
done

timeout 60 "$STRATA" convert "$WORK/evil.json" --to collapsed -o - >"$WORK/evil.collapsed" 2>"$WORK/evil.collapsed.err"
status=$?
[[ "$status" -eq 0 ]] && pass "hand-made: convert --to collapsed exited 0" || fail "hand-made: convert exited $status"
no_raw_controls "collapsed stacks on stdout" "$WORK/evil.collapsed" "$WORK/evil.collapsed.err"

timeout 60 "$STRATA" summary "$WORK/broken.json" >"$WORK/broken.summary" 2>"$WORK/broken.summary.err"
status=$?
[[ "$status" -ne 0 ]] && grep -qF 'thread\x1b]0;pwned' "$WORK/broken.summary.err" &&
  pass "broken: refused ($status) with the thread name escaped: $(head -c 200 "$WORK/broken.summary.err")" ||
  fail "broken: status $status, stderr: $(cat -v "$WORK/broken.summary.err")"
no_raw_controls "error message" "$WORK/broken.summary" "$WORK/broken.summary.err"

finish
