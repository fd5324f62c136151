#!/usr/bin/env bash
# The README's recipe (preload + STRATA_SHUTDOWN) and `strata record` give the same leaves and
# names for the same program (issue 20, "Symbols"): a program that spends its time in
# malloc/free, libc string functions and a function of its own with an inlined helper.
#  * plain, preloaded and recorded runs print the same output and exit the same;
#  * the preloaded profile is named at capture (ELF) and keeps every native frame's library
#    and lib-relative address; `strata symbolicate` then adds inline frames and file:line
#    (DWARF), with the capture's outer names, and a second run changes nothing and says so;
#  * self time is the function's the code belongs to (an inlined leaf's goes to its outer
#    function): the preloaded profile's self table is identical before and after
#    symbolicate, and its top self functions are the recorded profile's (sets with a
#    tolerance: sampling noise);
#  * no name has a symbol version ('@'); the checker and the front-end import accept them;
#  * a process tree recorded with --no-symbolicate (merged, named at capture) is
#    symbolicated per process the same way.
# perf's function-level attribution (`perf report --no-inline`) is printed beside for
# reference when perf works here (docs/symbols.md, "Self time").
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
program="$(readlink -f "$(binary tests/symbols/alloc_strings)")"
columns_check="$(dirname "$(readlink -f "$0")")/symbol_columns_check.py"
[[ -f "$columns_check" ]] || columns_check="$(binary tests/symbols/symbol_columns_check.py)"
export STRATA_NO_PROGRESS=1
iterations=60000

# self_table NAME FILE: "function<TAB>self%" of the self-time section (by samples), top 30.
self_table() {
  local name="$1" file="$2"
  "$STRATA" summary --top 30 --weight samples "$file" >"$WORK/$name.summary" 2>&1 ||
    { fail "$name: strata summary failed: $(head -3 "$WORK/$name.summary")"; return 1; }
  sed -n '/by self time/,/by total time/p' "$WORK/$name.summary" |
    awk 'NR > 2 && NF >= 9 && $1 ~ /^[0-9.]+$/ && $3 ~ /%$/ {
           name = $8; for (i = 9; i < NF; i++) name = name " " $i
           sub("%", "", $3); print name "\t" $3 }' >"$WORK/$name.self"  # names have spaces
}

# columns NAME FILE: symbol_columns_check output into $WORK/NAME.columns.
columns() {
  python3 "$columns_check" "$2" >"$WORK/$1.columns" 2>&1 || fail "$1: cannot read the profile's frames"
  sed 's/^/    /' "$WORK/$1.columns"
}
column_sum() {  # NAME KEY: KEY summed over processes.
  awk -v key="$2" '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) s += kv[2] } }
    END { print s + 0 }' "$WORK/$1.columns"
}

# --- The three runs ------------------------------------------------------------------------
"$program" "$iterations" >"$WORK/plain.out" 2>"$WORK/plain.err"
plain_status=$?
[[ $plain_status -eq 0 ]] || fail "plain run: status $plain_status"

run_profiled preloaded "$program" "$iterations"
require_profile preloaded || finish
[[ $RUN_STATUS -eq $plain_status ]] && cmp -s "$WORK/plain.out" "$WORK/preloaded.out" &&
  pass "preloaded: same output and status as the plain run" || fail "preloaded: output or status differ"

timeout 300 env "${SANITIZER_ENV[@]}" "$STRATA" record -q -o "$OUT/recorded.json" -- "$program" "$iterations" \
  >"$WORK/recorded.out" 2>"$WORK/recorded.err"
recorded_status=$?
[[ $recorded_status -eq $plain_status && -s "$OUT/recorded.json" ]] && cmp -s "$WORK/plain.out" "$WORK/recorded.out" &&
  pass "recorded: same output and status as the plain run" ||
  fail "recorded: status $recorded_status or output differs: $(tail -3 "$WORK/recorded.err")"

# --- The preloaded profile keeps its addresses; symbolicate adds inline frames -------------
columns preloaded "$OUT/preloaded.json"
named=$(column_sum preloaded named)
with_address=$(column_sum preloaded with_address)
result "preloaded: named frames $named, with address $with_address, bad lib $(column_sum preloaded bad_lib)"
[[ $named -gt 0 && $with_address -eq $named && $(column_sum preloaded bad_lib) -eq 0 ]] &&
  pass "preloaded: every named frame keeps its library and lib-relative address" ||
  fail "preloaded: named frames without (valid) addresses"

cp "$OUT/preloaded.json" "$OUT/preloaded_symbolicated.json"
if timeout 300 "$STRATA" symbolicate "$OUT/preloaded_symbolicated.json" >"$WORK/sym1.err" 2>&1; then
  sed 's/^/    /' "$WORK/sym1.err"
else
  fail "strata symbolicate failed: $(cat "$WORK/sym1.err")"
fi
columns preloaded_symbolicated "$OUT/preloaded_symbolicated.json"
inline=$(column_sum preloaded_symbolicated inline)
file_line=$(column_sum preloaded_symbolicated file_line)
result "preloaded_symbolicated: inline frames $inline, frames with file:line $file_line"
[[ $inline -gt 0 ]] && pass "symbolicate: inline frames added" || fail "symbolicate: no inline frame"
grep -q 'alloc_strings.c:' "$OUT/preloaded_symbolicated.json" && [[ $file_line -gt 0 ]] &&
  pass "symbolicate: file:line added" || fail "symbolicate: no file:line"
grep -q '"Mix (in alloc_strings) ([^"]*alloc_strings.c:[0-9]*)"' "$OUT/preloaded_symbolicated.json" &&
  pass "symbolicate: the program's own inlined helper is a frame" || fail "symbolicate: no Mix inline frame"

# Twice: nothing changes, and it says there is nothing to do.
cp "$OUT/preloaded_symbolicated.json" "$WORK/again.json"
"$STRATA" symbolicate "$WORK/again.json" >"$WORK/sym2.err" 2>&1 || fail "second symbolicate failed"
cmp -s "$WORK/again.json" "$OUT/preloaded_symbolicated.json" && pass "symbolicate twice: the file is unchanged" ||
  fail "symbolicate twice: the file changed"
# Under TSan the walks read stacks that moved on (0x1, stack addresses among the pcs): those
# stay unnamed, so the second run still has addresses to try and says how many it named.
skip_under_tsan "symbolicate twice: 'nothing to symbolicate' (pcs no library holds stay)" ||
  { grep -q 'nothing to symbolicate' "$WORK/sym2.err" &&
    pass "symbolicate twice: '$(head -c 60 "$WORK/sym2.err")...'" ||
    fail "symbolicate twice: no clear message: $(cat "$WORK/sym2.err")"; }

# --- Same self functions ----------------------------------------------------------------------
self_table preloaded "$OUT/preloaded.json"
self_table preloaded_symbolicated "$OUT/preloaded_symbolicated.json"
self_table recorded "$OUT/recorded.json"
if cmp -s "$WORK/preloaded.self" "$WORK/preloaded_symbolicated.self"; then
  pass "same samples, ELF names vs DWARF inline frames: identical self table ($(wc -l <"$WORK/preloaded.self") functions)"
else
  fail "the self table changed with symbolicate (an inlined leaf took self time):"
  diff "$WORK/preloaded.self" "$WORK/preloaded_symbolicated.self" | head -20 | sed 's/^/    /'
fi
echo "    self % by samples: preloaded+symbolicate | recorded"
join -t $'\t' -a1 -a2 -e - -o 0,1.2,2.2 <(sort -t $'\t' -k1,1 "$WORK/preloaded_symbolicated.self") \
  <(sort -t $'\t' -k1,1 "$WORK/recorded.self") | sort -t $'\t' -k2 -rn | head -12 | sed 's/^/    /'
# Every function with >= 5 % self in one profile has >= 1.5 % in the other.
compare_sets() {  # A B
  awk -F '\t' 'NR == FNR { other[$1] = $2; next } $2 >= 5 && !(($1 in other) && other[$1] >= 1.5) { print $1 " (" $2 " %)" }' \
    "$WORK/$2.self" "$WORK/$1.self"
}
missing="$(compare_sets preloaded_symbolicated recorded; compare_sets recorded preloaded_symbolicated)"
top_count=$(awk -F '\t' '$2 >= 5' "$WORK/recorded.self" | wc -l)
result "top self functions (>= 5 %): recorded $top_count, missing in the other profile: ${missing:-none}"
# At least 4 of them: the program's own shape. Under TSan its runtime's functions take ~75 %
# of the self time (2 above 5 %), so only the sets are compared there.
min_top=4
skip_under_tsan "at least 4 top self functions (TSan's runtime holds most of the time)" && min_top=1
[[ -z "$missing" && $top_count -ge $min_top ]] &&
  pass "record and the preload recipe have the same top self functions" ||
  fail "top self functions differ: ${missing:-none missing, $top_count above 5 %}"
for f in OwnWork malloc; do
  grep -q "^$f"$'\t' "$WORK/recorded.self" && grep -q "^$f"$'\t' "$WORK/preloaded.self" &&
    pass "$f has self time both ways" || fail "$f has no self time in one of the profiles"
done
if grep -qE '^(tcache_get|tcache_put|checked_request2size|Mix)[[:space:]]' "$WORK/recorded.self" "$WORK/preloaded_symbolicated.self"; then
  fail "an inlined function has self time: $(grep -hE '^(tcache_get|tcache_put|checked_request2size|Mix)[[:space:]]' "$WORK"/*.self | head -3)"
else
  pass "no inlined function has self time of its own"
fi

# --- Names, format, front-end -------------------------------------------------------------------
for name in preloaded preloaded_symbolicated recorded; do
  [[ -f "$WORK/$name.columns" ]] || columns "$name" "$OUT/$name.json" >/dev/null
  [[ $(column_sum "$name" versioned) -eq 0 ]] && ! grep -q '@@\|@GLIBC' "$WORK/$name.summary" &&
    pass "$name: no symbol version in names" || fail "$name: a name with a symbol version"
  check_format "$name"
  # Under TSan OwnWork is not among the front-end's top functions (TSan's runtime is): the
  # import of every thread with its samples is still checked.
  if ((UNDER_TSAN)); then
    stats "$name" >/dev/null && check_frontend "$name"
  else
    stats "$name" >/dev/null && check_frontend "$name" "GeckoMain:OwnWork"
  fi
done

# --- A merged process tree named at capture ---------------------------------------------------------
timeout 300 env "${SANITIZER_ENV[@]}" "$STRATA" record -q --no-symbolicate -o "$OUT/tree.json" -- \
  sh -c "\"$program\" 20000 && \"$program\" 20000" >"$WORK/tree.out" 2>"$WORK/tree.err" ||
  fail "tree: strata record failed: $(tail -3 "$WORK/tree.err")"
if [[ -s "$OUT/tree.json" ]]; then
  "$STRATA" symbolicate "$OUT/tree.json" -o "$OUT/tree_symbolicated.json" >"$WORK/tree_sym.err" 2>&1 ||
    fail "tree: symbolicate failed: $(cat "$WORK/tree_sym.err")"
  columns tree "$OUT/tree.json"
  columns tree_symbolicated "$OUT/tree_symbolicated.json"
  programs=$(grep -c 'named=[1-9]' "$WORK/tree.columns")
  with_inline=$(awk '{ for (i = 2; i <= NF; i++) if ($i ~ /^inline=[1-9]/) n++ } END { print n + 0 }' \
    "$WORK/tree_symbolicated.columns")
  result "tree: processes with named frames $programs, with inline frames after symbolicate $with_inline"
  [[ $(column_sum tree bad_lib) -eq 0 && $(column_sum tree with_address) -eq $(column_sum tree named) ]] &&
    pass "tree: every process's named frames keep valid addresses through the merge" ||
    fail "tree: frames without valid addresses after the merge"
  [[ $with_inline -ge 2 ]] && pass "tree: both program processes get inline frames" ||
    fail "tree: inline frames in $with_inline process(es), expected the 2 program runs"
  check_format tree_symbolicated
fi

# --- perf, for reference --------------------------------------------------------------------------------
if command -v perf >/dev/null && timeout 120 perf record -q -F 999 -o "$WORK/perf.data" "$program" "$iterations" \
  >/dev/null 2>"$WORK/perf.err"; then
  perf report -i "$WORK/perf.data" --no-children --no-inline --sort sym --stdio 2>/dev/null |
    awk '/%/ && $1 !~ /^#/ { sub("%", "", $1); if ($1 + 0 >= 2) printf "%s %s\n", $3, $1 }' | head -10 >"$WORK/perf.self"
  result "perf --no-inline self (>= 2 %): $(tr '\n' ',' <"$WORK/perf.self")"
else
  echo "    (perf not usable here: $(head -c 120 "$WORK/perf.err" 2>/dev/null))"
fi

finish
