#!/usr/bin/env bash
# `strata tree` and `strata summary --tree` (issue 39; docs/cli.md, "strata tree") on a real
# program whose threads measure themselves: sleep_and_spin's "sleeper" waits 600 ms in
# sleeper_wait while its "spinner" burns 300 ms of CPU in spinner_burn. Recorded in precise
# mode (blocked threads sampled), as weights_test does.
#   - the program's status and output lines are those of its plain run;
#   - tree --weight cpu: the line of spinner_burn carries the spinner's measured CPU time
#     (within -15/+10 %) and most of the profile's CPU; its path starts at the spinner's root;
#   - tree --weight wall --thread sleeper: sleeper_wait's line carries the measured wait
#     (within -10/+15 %), with 90 % or more of the thread's wall time;
#   - every line fits 80 columns in a pipe, ASCII guides, no escape byte; --depth 1 prints
#     one level under each thread; --no-fold prints more lines than the folded tree;
#   - summary --tree appends the tree; bad --depth, --min-percent, --width exit 2.
# Ratios to what the program measured, no timing goal: the same checks hold loaded.
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
PROGRAM="$(binary tests/cli/sleep_and_spin)"
export STRATA_BASE_LIB="$STRATA_LIB"
export STRATA_NO_PROGRESS=1
ARGS=(--sleep-ms 600 --spin-ms 300)

measured() { sed -n "s/^thread=$1 .*\b$2=\([0-9.]*\).*/\1/p" "$WORK/run.out" | head -1; }
within() { awk -v v="$1" -v r="$2" -v lo="$3" -v hi="$4" 'BEGIN { exit !(v != "" && r > 0 && v >= lo * r && v <= hi * r) }'; }
shape() { sed 's/=[0-9.]*/=N/g' "$WORK/$1.out"; }
# column FILE PATTERN N: field N of the first tree line matching PATTERN.
column() { awk -v p="$2" -v n="$3" 'index($0, p) { print $n; exit }' "$1"; }

timeout 60 "$PROGRAM" "${ARGS[@]}" >"$WORK/plain.out" 2>&1
plain_status=$?
timeout 120 env "${SANITIZER_ENV[@]}" "$STRATA" record -q --features precise -o "$OUT/run.json" -- "$PROGRAM" "${ARGS[@]}" \
  >"$WORK/run.out" 2>"$WORK/run.err"
run_status=$?
if [[ $plain_status == 0 && $run_status == 0 && "$(shape plain)" == "$(shape run)" ]]; then
  pass "plain and recorded: status 0, the same output lines"
else
  fail "plain status $plain_status, recorded $run_status, or the output differs"
  sed 's/^/    /' "$WORK/plain.out" "$WORK/run.out" "$WORK/run.err"
fi
spinner_cpu=$(measured spinner cpu_ms)
sleeper_wall=$(measured sleeper wall_ms)
result "measured spinner_cpu_ms=$spinner_cpu sleeper_wall_ms=$sleeper_wall"

# --- CPU: the hot path ------------------------------------------------------------------------
"$STRATA" tree "$OUT/run.json" --weight cpu >"$WORK/cpu.txt" 2>"$WORK/cpu.err"
status=$?
sed 's/^/    /' "$WORK/cpu.txt" | head -24
[[ $status == 0 ]] || fail "tree --weight cpu: status $status: $(cat "$WORK/cpu.err")"
burn_ms=$(column "$WORK/cpu.txt" spinner_burn 3)
burn_share=$(column "$WORK/cpu.txt" spinner_burn 1)
result "tree spinner_burn_cpu_ms=$burn_ms share=$burn_share"
within "$burn_ms" "$spinner_cpu" 0.85 1.1 \
  && pass "tree --weight cpu: spinner_burn's line has the spinner's measured CPU ($burn_ms of $spinner_cpu ms)" \
  || fail "tree --weight cpu: spinner_burn ${burn_ms:-missing} ms, the spinner measured $spinner_cpu ms"
awk -v s="${burn_share%\%}" 'BEGIN { exit !(s >= 50) }' \
  && pass "tree --weight cpu: spinner_burn has most of the profile's CPU ($burn_share)" \
  || fail "tree --weight cpu: spinner_burn's share ${burn_share:-missing}"
# Its path: the spinner's root line comes before it, with no other thread's root between.
awk '/^ *[0-9.]+% +[0-9.]+% +[0-9.]+  [^|` ]/ { root = $0 } index($0, "spinner_burn") { print root; exit }' "$WORK/cpu.txt" \
  | grep -q "spinner (pid" && pass "tree --weight cpu: spinner_burn is under the spinner thread" \
  || fail "tree --weight cpu: spinner_burn not under the spinner's root"

# --- Wall: the wait ---------------------------------------------------------------------------
"$STRATA" tree "$OUT/run.json" --thread sleeper >"$WORK/wall.txt" 2>&1
sed 's/^/    /' "$WORK/wall.txt" | head -12
wait_ms=$(column "$WORK/wall.txt" sleeper_wait 3)
wait_share=$(column "$WORK/wall.txt" sleeper_wait 1)
within "$wait_ms" "$sleeper_wall" 0.9 1.15 && awk -v s="${wait_share%\%}" 'BEGIN { exit !(s >= 90) }' \
  && pass "tree --thread sleeper: sleeper_wait's line has the measured wait ($wait_ms of $sleeper_wall ms, $wait_share)" \
  || fail "tree --thread sleeper: sleeper_wait ${wait_ms:-missing} ms ($wait_share), measured $sleeper_wall ms"
grep -q "^Filtered: thread 'sleeper'" "$WORK/wall.txt" && pass "tree: says which filter applied" \
  || fail "tree: no Filtered line"

# --- Layout -----------------------------------------------------------------------------------
"$STRATA" tree "$OUT/run.json" --min-percent 0 --no-fold >"$WORK/all.txt" 2>&1
"$STRATA" tree "$OUT/run.json" --min-percent 0 >"$WORK/folded.txt" 2>&1
wide=$(cat "$WORK/cpu.txt" "$WORK/wall.txt" "$WORK/all.txt" "$WORK/folded.txt" | awk 'length($0) > 80' | wc -l)
escapes=$(cat "$WORK/cpu.txt" "$WORK/all.txt" | LC_ALL=C grep -c $'\x1b')
[[ $wide == 0 && $escapes == 0 ]] && pass "every line fits 80 columns in a pipe, no escape byte" \
  || fail "$wide lines over 80 columns, $escapes with ESC"
[[ $(wc -l <"$WORK/all.txt") -gt $(wc -l <"$WORK/folded.txt") ]] && grep -q ' > ' "$WORK/folded.txt" \
  && pass "folding: $(wc -l <"$WORK/folded.txt") lines folded ('a > b'), $(wc -l <"$WORK/all.txt") with --no-fold" \
  || fail "folding: $(wc -l <"$WORK/folded.txt") folded lines, $(wc -l <"$WORK/all.txt") unfolded"
"$STRATA" tree "$OUT/run.json" --depth 1 --min-percent 0 >"$WORK/depth.txt" 2>&1
deeper=$(awk 'NR > 3 && length($0) > 27 { g = substr($0, 28, 2); if (g == "| " || g == "  ") n++ } END { print n + 0 }' "$WORK/depth.txt")
[[ $deeper == 0 ]] && grep -q '^ *[0-9.]*% .*[|`]- ' "$WORK/depth.txt" \
  && pass "--depth 1: one level under each thread" || fail "--depth 1: $deeper deeper lines"

"$STRATA" summary "$OUT/run.json" --tree --weight cpu >"$WORK/summary.txt" 2>&1
grep -q '^Threads:' "$WORK/summary.txt" && grep -q '^Call tree by CPU time' "$WORK/summary.txt" \
  && grep -q 'spinner_burn' "$WORK/summary.txt" \
  && pass "summary --tree --weight cpu: the summary, then the call tree by CPU time" \
  || fail "summary --tree: $(tail -5 "$WORK/summary.txt")"

for bad in "--depth -1" "--min-percent 200" "--width 10" "--weight bogus"; do
  # shellcheck disable=SC2086
  "$STRATA" tree "$OUT/run.json" $bad >/dev/null 2>"$WORK/bad.err"
  status=$?
  [[ $status == 2 && -s "$WORK/bad.err" ]] && pass "tree $bad: status 2 ($(head -1 "$WORK/bad.err" | cut -c1-80))" \
    || fail "tree $bad: status $status"
done

finish
