#!/usr/bin/env bash
# A binary stripped with a .gnu_debuglink (issue 20: "loses its outer frames' names,
# sym_dbglink+0x1170 instead of main, HotLoop"): every way of profiling it names HotLoop and
# main from the debug file beside it — preloaded (names resolved in the process), preloaded
# with rawaddresses then `strata symbolicate` (DWARF: file:line too), and `strata record`.
# No name carries a symbol version (`__libc_start_main@@GLIBC_2.34`). Control: the same
# binary copied alone (no debug file beside it) has neither name, so the names come from the
# debug file.
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
program="$(binary tests/symbols/dbglink/sym_dbglink)"
# The runfiles entry is a symlink: the debug file is beside the real file.
program="$(readlink -f "$program")"
[[ -f "$(dirname "$program")/sym_dbglink.debug" ]] || fail "no debug file beside $program"
export STRATA_NO_PROGRESS=1
iterations=300000000

# names NAME FILE: HotLoop and main are frames of the profile, and no name has a version.
names() {
  local name="$1" file="$2"
  "$GECKO_CHECK" --max-per-code=3 "$file" >"$WORK/$name.check" 2>&1 ||
    fail "$name: the checker rejects the profile: $(head -5 "$WORK/$name.check")"
  "$STRATA" summary --top 30 "$file" >"$WORK/$name.summary" 2>&1 || fail "$name: strata summary failed"
  if grep -q 'HotLoop' "$WORK/$name.summary" && grep -qE '(^| )main( |$)' "$WORK/$name.summary"; then
    pass "$name: HotLoop and main are named"
  else
    fail "$name: HotLoop or main missing:"
    sed 's/^/    /' "$WORK/$name.summary" | head -30
  fi
  # A PLT stub's name (`puts@plt`, as perf names it) is not a symbol version.
  if grep -E '@' "$WORK/$name.summary" | grep -qvE '@plt( |$)'; then
    fail "$name: a name with a symbol version: $(grep '@' "$WORK/$name.summary" | grep -vE '@plt( |$)' | head -3)"
  else
    pass "$name: no symbol version in names"
  fi
}

run_profiled preloaded "$program" "$iterations"
[[ $RUN_STATUS -eq 0 && -s "$OUT/preloaded.json" ]] && names preloaded "$OUT/preloaded.json" ||
  fail "preloaded: status $RUN_STATUS or no profile"

STRATA_STARTUP_FEATURES=rawaddresses run_profiled raw "$program" "$iterations"
if [[ $RUN_STATUS -eq 0 && -s "$OUT/raw.json" ]] &&
  timeout 120 "$STRATA" symbolicate "$OUT/raw.json" -o "$OUT/raw_symbolicated.json" >"$WORK/sym.out" 2>&1; then
  names raw_symbolicated "$OUT/raw_symbolicated.json"
  grep -q 'hot_loop.cc' "$OUT/raw_symbolicated.json" && pass "raw_symbolicated: file:line from the debug file's DWARF" ||
    fail "raw_symbolicated: no hot_loop.cc file name"
else
  fail "raw: status $RUN_STATUS, or strata symbolicate failed: $(cat "$WORK/sym.out" 2>/dev/null)"
fi

timeout 180 env "${SANITIZER_ENV[@]}" "$STRATA" record -q -o "$OUT/recorded.json" -- "$program" "$iterations" \
  >"$WORK/recorded.out" 2>"$WORK/recorded.err" && [[ -s "$OUT/recorded.json" ]] &&
  names recorded "$OUT/recorded.json" || fail "recorded: failed: $(tail -3 "$WORK/recorded.err")"

# Control: the stripped binary alone. Its functions have no name, but its unwind tables
# (.eh_frame_hdr) delimit them: all of HotLoop's addresses are one row, "sym_dbglink!0x<start>"
# (issue 20: stripped binaries were listed per instruction address, "sym_dbglink+0x...").
mkdir -p "$WORK/alone"
cp "$program" "$WORK/alone/sym_dbglink"
run_profiled alone "$WORK/alone/sym_dbglink" "$iterations"
if [[ $RUN_STATUS -eq 0 && -s "$OUT/alone.json" ]]; then
  "$STRATA" summary --top 30 "$OUT/alone.json" >"$WORK/alone.summary" 2>&1
  grep -q 'HotLoop' "$WORK/alone.summary" && fail "alone: HotLoop named without the debug file?" ||
    pass "alone: without its debug file the binary's functions have no names (the test exercises the link)"
  self_section=$(sed -n '/by self time/,/by total time/p' "$WORK/alone.summary")
  per_address=$(grep -c 'sym_dbglink+0x' <<<"$self_section")
  top_row=$(sed -n '3p' <<<"$self_section")
  top_share=$(awk '{ sub("%", "", $3); print $3 }' <<<"$top_row")  # self wall, self CPU, self %
  min_share=90
  if ((UNDER_TSAN)); then
    # The top rows are TSan's instrumentation (__tsan_read8 in libtsan): the program's own row.
    top_row=$(sed -n '3,$p' <<<"$self_section" | grep -m1 'sym_dbglink')
    top_share=$(awk '{ sub("%", "", $3); print $3 }' <<<"$top_row")
    skip_under_tsan "alone: the spinning function's share (TSan's instrumentation takes most)" &&
      min_share=0
  fi
  result "alone: top self row '$top_row', per-address rows $per_address"
  if [[ "$top_row" == *'sym_dbglink!0x'* ]] && ge "${top_share:-0}" "$min_share" && [[ $per_address -eq 0 ]]; then
    pass "alone: the spinning function is one row of its own ($top_share% self), by its unwind-table start"
  else
    fail "alone: stripped code is not grouped by function:"
    sed 's/^/    /' <<<"$self_section"
  fi
else
  fail "alone: status $RUN_STATUS or no profile"
fi

# The same through strata symbolicate (DWARF symbolizer, no DWARF here: the same grouping).
STRATA_STARTUP_FEATURES=rawaddresses run_profiled alone_raw "$WORK/alone/sym_dbglink" "$iterations"
if [[ $RUN_STATUS -eq 0 && -s "$OUT/alone_raw.json" ]] &&
  "$STRATA" symbolicate "$OUT/alone_raw.json" -o "$OUT/alone_sym.json" >/dev/null 2>&1; then
  "$STRATA" summary --top 30 "$OUT/alone_sym.json" >"$WORK/alone_sym.summary" 2>&1
  top_row=$(sed -n '/by self time/,/by total time/p' "$WORK/alone_sym.summary" | sed -n '3p')
  if ((UNDER_TSAN)); then  # The program's own row, below TSan's instrumentation.
    top_row=$(sed -n '/by self time/,/by total time/p' "$WORK/alone_sym.summary" | sed -n '3,$p' |
      grep -m1 'sym_dbglink')
  fi
  [[ "$top_row" == *'sym_dbglink!0x'* ]] && pass "alone, symbolicated: one row by unwind-table start" ||
    fail "alone, symbolicated: top row '$top_row'"
else
  fail "alone_raw: status $RUN_STATUS, or symbolicate failed"
fi

finish
