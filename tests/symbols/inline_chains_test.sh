#!/usr/bin/env bash
# Every inline level, as llvm-symbolizer gives it (issue 34; docs/symbols.md): inline_levels
# (-O2 -g: OuterLevel inlines MiddleLevel, which inlines InnerLevel; Worker inlines Crunch,
# which calls std::sin through the PLT, and std::lock_guard/std::mutex::lock) recorded with
# `strata record`, then the frames the profile gives every distinct native address (the
# leaf at its pc, callers at return address - 1) compared with llvm-symbolizer --inlining on
# the same file (objdump's labels for PLT stubs). Before the fix the middle level was lost
# (OuterLevel;InnerLevel) and PLT stubs had no name of their own.
#   - every address of the program itself: 100 % equal; every module: reported, and the
#     whole profile 100 % equal (libc, libm, libstdc++, the vDSO: symbol-table names up to
#     aliases);
#   - some sample reads OuterLevel > MiddleLevel > InnerLevel, and Worker > Crunch, and one
#     leaf is "sin@plt" or libm's sin (the stub itself is sampled only sometimes).
# The same comparison, every address 100 % equal, on:
#   - the preload recipe's file (named at capture from ELF symbols) after `strata symbolicate`
#     (which expands the inline levels from DWARF);
#   - the demo (tools/demo/strata_demo, linked with the base tier) under `strata record`.
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
program="$(binary tests/symbols/inline_levels)"
if ! command -v llvm-symbolizer >/dev/null; then
  fail "llvm-symbolizer is missing (tools/setup.sh installs llvm)"
  finish
fi
env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$OUT/inline.json" -- "$program" 1.0 \
  >"$WORK/record.out" 2>"$WORK/record.err"
status=$?
[[ $status -eq 0 ]] || { fail "strata record: status $status"; sed 's/^/    /' "$WORK/record.err"; finish; }
check_format inline

python3 "$(dirname "$0")/inline_chains_check.py" "$OUT/inline.json" \
  --require-module inline_levels=100 --require-all=100 >"$WORK/check.out" 2>&1
check_status=$?
sed 's/^/    /' "$WORK/check.out"
result "scenario=inline-chains $(tail -1 "$WORK/check.out" | sed 's/^inline_chains: //')"
if [[ $check_status -eq 0 ]]; then
  pass "every address's frames equal llvm-symbolizer's"
else
  fail "frames differ from llvm-symbolizer's (above)"
fi

python3 - "$OUT/inline.json" >"$WORK/chains.out" <<'PY'
import json, re, sys
p = json.load(open(sys.argv[1]))
suffix = re.compile(r" \(in [^()]*\)( \(.*\))?$")
found = set()
for t in p["threads"]:
    st, ft, sk = t["stringTable"], t["frameTable"], t["stackTable"]
    fl, sp, sf = ft["schema"]["location"], sk["schema"]["prefix"], sk["schema"]["frame"]
    for s in range(len(sk["data"])):
        names, i = [], s
        while i is not None:
            names.append(suffix.sub("", st[ft["data"][sk["data"][i][sf]][fl]]))
            i = sk["data"][i][sp]
        path = " > ".join(reversed(names))
        if re.search(r"OuterLevel\(double\) > \S*MiddleLevel\b[^>]* > \S*InnerLevel\b", path):
            found.add("outer-middle-inner")
        if re.search(r"Worker\(double\) > \S*Crunch\b", path):
            found.add("worker-crunch")
print(" ".join(sorted(found)))
PY
# check_all NAME PROFILE [--require-module ...]: every address of PROFILE equal.
check_all() {
  local name="$1" profile="$2"
  shift 2
  python3 "$(dirname "$0")/inline_chains_check.py" "$profile" "$@" --require-all=100 \
    >"$WORK/$name.check" 2>&1
  local check_status=$?
  sed 's/^/    /' "$WORK/$name.check"
  result "scenario=inline-chains-$name $(tail -1 "$WORK/$name.check" | sed 's/^inline_chains: //')"
  if [[ $check_status -eq 0 ]]; then
    pass "$name: every address's frames equal llvm-symbolizer's"
  else
    fail "$name: frames differ from llvm-symbolizer's (above)"
  fi
}

env "${SANITIZER_ENV[@]}" LD_PRELOAD="$(binary base/libstrata_base.so)" STRATA_STARTUP=1 \
  STRATA_SHUTDOWN="$OUT/preload.json" "$program" 1.0 >"$WORK/preload.out" 2>&1 ||
  fail "preload recipe: status $?: $(tail -3 "$WORK/preload.out")"
if "$STRATA" symbolicate "$OUT/preload.json" -o "$OUT/preload.sym.json" >"$WORK/sym.out" 2>&1; then
  check_all preload-symbolicated "$OUT/preload.sym.json" --require-module inline_levels=100
else
  fail "strata symbolicate: $(tail -3 "$WORK/sym.out")"
fi

demo="$(binary tools/demo/strata_demo)"
env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$OUT/demo.json" -- "$demo" 2 \
  >"$WORK/demo.out" 2>"$WORK/demo.err"
status=$?
if [[ $status -eq 0 ]]; then
  check_format demo
  check_all demo "$OUT/demo.json" --require-module strata_demo=100
else
  fail "strata record of the demo: status $status: $(tail -3 "$WORK/demo.err")"
fi

chains="$(cat "$WORK/chains.out")"
for want in outer-middle-inner worker-crunch; do
  if [[ " $chains " == *" $want "* ]]; then
    pass "a stack reads $want"
  else
    fail "no stack reads $want (found: $chains)"
  fi
done
finish
