#!/usr/bin/env bash
# Issue 16, "samples of a library dlclose'd and replaced at the same address are named after
# the newcomer": replaced_library (a real program, no Strata include) dlopens plugin A and
# spins in a_work, dlcloses A, dlopens plugin B — placed by the loader where A was (the program
# checks, and retries otherwise) — and spins in b_work at the same offset; B stays loaded at
# exit. Each sample must be named after the library mapped when it was taken: a_work in
# libreplaced_lib_a.so and b_work in libreplaced_lib_b.so, never a_work's samples as b_work.
# Three ways: preloaded (names resolved in the process), preloaded with rawaddresses then
# `strata symbolicate`, and `strata record`. Each run has the plain run's exit status and
# output; each profile passes the format checker.
source "$(dirname "$0")/../../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
program="$(binary tests/host_safety/small/replaced_library)"
lib_a="$(binary tests/host_safety/small/libreplaced_lib_a.so)"
lib_b="$(binary tests/host_safety/small/libreplaced_lib_b.so)"
export STRATA_NO_PROGRESS=1
iterations=150000000

timeout 120 "$program" "$lib_a" "$lib_b" "$iterations" >"$WORK/plain.out" 2>"$WORK/plain.err"
plain_status=$?
grep -q 'where A was: yes' "$WORK/plain.out" || fail "plain: B was not loaded where A was: $(cat "$WORK/plain.out")"

# same_as_plain NAME STATUS: exit status and output as the plain run.
same_as_plain() {
  if [[ "$2" -eq "$plain_status" ]] && cmp -s "$WORK/plain.out" "$WORK/$1.out"; then
    pass "$1: exit status $2 and output as without Strata"
  else
    fail "$1: exit status $2 (plain $plain_status) or output differs: $(cat "$WORK/$1.out")"
  fi
}

# check_names NAME FILE: samples in a_work are named in plugin A, those in b_work in plugin B.
check_names() {
  local name="$1" file="$2"
  if ! "$GECKO_CHECK" --max-per-code=3 "$file" >"$WORK/$name.check" 2>&1; then
    fail "$name: the checker rejects the profile: $(head -5 "$WORK/$name.check")"
  fi
  "$PROFILE_STATS" "$file" "GeckoMain:a_work" "GeckoMain:b_work" "GeckoMain:libreplaced_lib_a.so" \
    "GeckoMain:libreplaced_lib_b.so" "GeckoMain:a_work_(in_libreplaced_lib_a.so)|a_work (in libreplaced_lib_a.so)" \
    "GeckoMain:b_work_(in_libreplaced_lib_b.so)|b_work (in libreplaced_lib_b.so)" >"$WORK/$name.stats" 2>&1
  count() { awk -v p="$1" '$1 == "match" && index($0, "patterns=" p " ") { for (i = 2; i <= NF; i++) if ($i ~ /^count=/) print substr($i, 7) }' "$WORK/$name.stats"; }
  local a b a_in_a b_in_b
  a=$(count a_work)
  b=$(count b_work)
  a_in_a=$(count "a_work_(in_libreplaced_lib_a.so)|a_work_(in_libreplaced_lib_a.so)")
  b_in_b=$(count "b_work_(in_libreplaced_lib_b.so)|b_work_(in_libreplaced_lib_b.so)")
  result "case=$name a_work=${a:-?} b_work=${b:-?} a_work_in_a=${a_in_a:-?} b_work_in_b=${b_in_b:-?}"
  # Under TSan the spinning a_work and b_work call nothing TSan intercepts: their samples are
  # taken at the next safe point (after the spin), so which function they land in says nothing.
  if skip_under_tsan "$name: samples in a_work and b_work, and their shares"; then return; fi
  if [[ "${a:-0}" -gt 0 && "${b:-0}" -gt 0 ]]; then
    pass "$name: samples in a_work ($a) and in b_work ($b)"
  else
    fail "$name: a_work has ${a:-?} samples, b_work ${b:-?} (a_work's samples named after the newcomer?)"
    grep -v '^lib ' "$WORK/$name.stats" | head -20
  fi
  # The ratio of time: each spins the same loop, so neither should have under a fifth of both.
  if [[ -n "$a" && -n "$b" ]] && ((a * 5 >= a + b && b * 5 >= a + b)); then
    pass "$name: a_work and b_work have comparable shares ($a / $b)"
  else
    fail "$name: a_work $a and b_work $b samples: one phase is misattributed"
  fi
}

# --- preloaded, names resolved in the process
run_profiled preloaded "$program" "$lib_a" "$lib_b" "$iterations"
same_as_plain preloaded "$RUN_STATUS"
[[ -s "$OUT/preloaded.json" ]] && check_names preloaded "$OUT/preloaded.json" || fail "preloaded: no profile"
if ! skip_under_tsan "preloaded: frames 'a_work (in libreplaced_lib_a.so)'"; then
  grep -q '"a_work (in libreplaced_lib_a.so)"' "$OUT/preloaded.json" &&
    pass "preloaded: frames 'a_work (in libreplaced_lib_a.so)'" || fail "preloaded: no frame 'a_work (in libreplaced_lib_a.so)'"
fi

# --- preloaded with raw addresses, symbolicated afterwards
STRATA_STARTUP_FEATURES=rawaddresses run_profiled raw "$program" "$lib_a" "$lib_b" "$iterations"
same_as_plain raw "$RUN_STATUS"
if [[ -s "$OUT/raw.json" ]] && timeout 120 "$STRATA" symbolicate "$OUT/raw.json" -o "$OUT/raw_symbolicated.json" \
  >"$WORK/symbolicate.out" 2>&1; then
  check_names raw_symbolicated "$OUT/raw_symbolicated.json"
else
  fail "raw: no profile, or strata symbolicate failed: $(cat "$WORK/symbolicate.out" 2>/dev/null)"
fi

# --- strata record
timeout 180 env "${SANITIZER_ENV[@]}" "$STRATA" record -q -o "$OUT/recorded.json" -- \
  "$program" "$lib_a" "$lib_b" "$iterations" >"$WORK/recorded.out" 2>"$WORK/recorded.err"
same_as_plain recorded $?
[[ -s "$OUT/recorded.json" ]] && check_names recorded "$OUT/recorded.json" || fail "recorded: no profile"

finish
