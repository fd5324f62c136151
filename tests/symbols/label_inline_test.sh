#!/usr/bin/env bash
# Labels placed after inline expansion (issue 34; docs/symbols.md, "Labels"): label_inline
# (-O2 -g, linked with the base tier) enters "Handle requests" in Worker, which inlines Crunch
# and std::sin<int>, and "Middle step" in MiddleLevel, inlined into OuterLevel and inlining
# InnerLevel. Each label must sit right below the function that pushed it:
# Worker;Handle requests;Crunch;std::sin<int>;... and OuterLevel;MiddleLevel;Middle step;
# InnerLevel, in every sample of the file, every path of the call tree (`strata summary
# --tree`), every collapsed stack and every pprof trace (`go tool pprof -traces`, where Go is
# installed). Before push sites, every label went below all inlined frames of its physical
# frame (Worker;Crunch;std::sin<int>;Handle requests: 1 441 of 1 443 samples misplaced).
#   - `strata record`: raw addresses, symbolicated with DWARF at the end;
#   - the preload recipe (named at capture from ELF symbols), then `strata symbolicate`.
# Both files pass the format checker, and the front-end's importer (profiler-cli) reads the
# recorded one with every thread (it ignores the pushSite column).
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
program="$(binary tests/symbols/label_inline)"
check="$(dirname "$0")/label_placement_check.py"

# check_placement NAME: the placement checks on $OUT/NAME.json and its tree, collapsed stacks
# and pprof traces.
check_placement() {
  local name="$1" traces=()
  "$STRATA" summary --tree --no-fold --min-percent 0 --width 1000 "$OUT/$name.json" \
    >"$WORK/$name.tree" 2>&1 || fail "$name: strata summary --tree failed"
  "$STRATA" convert --to collapsed -o "$WORK/$name.collapsed" "$OUT/$name.json" 2>/dev/null \
    || fail "$name: strata convert --to collapsed failed"
  "$STRATA" convert --to pprof -o "$WORK/$name.pb.gz" "$OUT/$name.json" 2>/dev/null \
    || fail "$name: strata convert --to pprof failed"
  if command -v go >/dev/null; then
    if HOME="$WORK" GOCACHE="$WORK/gocache" go tool pprof -traces "$WORK/$name.pb.gz" \
        >"$WORK/$name.traces" 2>"$WORK/$name.traces.err"; then
      traces=(--pprof-traces "$WORK/$name.traces")
    else
      fail "$name: go tool pprof -traces: $(head -3 "$WORK/$name.traces.err")"
    fi
  else
    echo "    (go is not installed: the pprof traces are not checked)"
  fi
  python3 "$check" "$OUT/$name.json" --tree "$WORK/$name.tree" \
    --collapsed "$WORK/$name.collapsed" "${traces[@]}" >"$WORK/$name.placement" 2>&1
  local status=$?
  sed 's/^/    /' "$WORK/$name.placement"
  result "scenario=label-inline-$name $(tail -1 "$WORK/$name.placement" | sed 's/^label_placement: //')"
  # Under TSan the walk reads a stack that moved on since the signal (1 of 2 030 samples off).
  if skip_under_tsan "$name: every label right below the function that pushed it (status $status)"; then
    :
  elif [[ $status -eq 0 ]]; then
    pass "$name: every label sits right below the (inlined) function that pushed it"
  else
    fail "$name: labels misplaced among inlined frames (above)"
  fi
}

env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$OUT/record.json" -- "$program" 0.6 \
  >"$WORK/record.out" 2>"$WORK/record.err"
status=$?
if [[ $status -ne 0 ]]; then
  fail "strata record: status $status"
  sed 's/^/    /' "$WORK/record.err"
else
  check_format record
  # The front-end's own importer reads the file with its pushSite column.
  stats record >/dev/null && check_frontend record
  check_placement record
fi

run_profiled preload "$program" 0.6
if [[ $RUN_STATUS -ne 0 || ! -s "$OUT/preload.json" ]]; then
  fail "preload recipe: status $RUN_STATUS, profile missing"
  show_run preload
else
  "$STRATA" symbolicate "$OUT/preload.json" -o "$OUT/preload_symbolicated.json" \
    >"$WORK/symbolicate.out" 2>&1 || fail "strata symbolicate: $(cat "$WORK/symbolicate.out")"
  check_format preload_symbolicated
  check_placement preload_symbolicated
fi
finish
