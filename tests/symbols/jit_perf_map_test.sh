#!/usr/bin/env bash
# JIT code named (issue 34; docs/symbols.md "JIT code"): `node --perf-basic-prof` writes
# /tmp/perf-<pid>.map, one line per compiled function; `strata record` names the addresses in
# no module from it ("JS:*fibonacciWork /…/jit_script.js:3:… (in perf-PID.map)").
#   - the program's output and status are its plain run's;
#   - of the main thread's samples that carry CPU (the JS thread runs the script), at least
#     90 % have a frame named after one of the script's own functions (fibonacciWork,
#     hotLoop), as `perf report` shows them for such a run; before, they were raw addresses.
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
script="$(cd "$(dirname "$0")" && pwd)/jit_script.js"
[[ -f "$script" ]] || script="$(binary tests/symbols/jit_script.js)"
command -v node >/dev/null || { fail "node is missing (tools/setup.sh installs nodejs)"; finish; }

node "$script" 800 >"$WORK/plain.out" 2>&1 || fail "plain run failed: $(cat "$WORK/plain.out")"
env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$OUT/node.json" -- node --perf-basic-prof "$script" 800 \
  >"$WORK/record.out" 2>"$WORK/record.err"
status=$?
pids=$(python3 -c "
import json,sys
p=json.load(open(sys.argv[1]))
def walk(q):
    for t in q.get('threads',[]): yield t['pid']
    for c in q.get('processes',[]): yield from walk(c)
print(' '.join(sorted({str(x) for x in walk(p)})))" "$OUT/node.json" 2>/dev/null)
for pid in $pids; do rm -f "/tmp/perf-$pid.map"; done
[[ $status -eq 0 ]] || { fail "strata record: status $status: $(tail -3 "$WORK/record.err")"; finish; }
cmp -s "$WORK/plain.out" "$WORK/record.out" && pass "output as plain" \
  || fail "output differs: $(cat "$WORK/record.out")"
check_format node

python3 - "$OUT/node.json" >"$WORK/share.out" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
main = next(t for t in p["threads"] if t["name"] == "GeckoMain")
st, ft, sk, sa = main["stringTable"], main["frameTable"], main["stackTable"], main["samples"]
loc = ft["schema"]["location"]
prefix, frame = sk["schema"]["prefix"], sk["schema"]["frame"]
scol, ccol = sa["schema"]["stack"], sa["schema"].get("threadCPUDelta")
own = ("fibonacciWork", "hotLoop")
memo = {}
def named(s):
    if s is None: return False
    if s not in memo:
        text = st[ft["data"][sk["data"][s][frame]][loc]]
        memo[s] = any(f in text and "jit_script.js" in text for f in own) or named(sk["data"][s][prefix])
    return memo[s]
running = [r for r in sa["data"] if ccol is not None and (r[ccol] or 0) > 0]
hits = sum(1 for r in running if named(r[scol]))
print(len(running), hits)
PY
read -r running hits <"$WORK/share.out"
result "scenario=jit-perf-map running_samples=$running named_by_script=$hits"
if [[ "${running:-0}" -gt 0 ]] && (( hits * 100 >= running * 90 )); then
  pass "$hits of $running running samples of the JS thread carry the script's function names"
else
  fail "${hits:-0} of ${running:-0} running samples carry the script's function names (want >= 90 %)"
fi
finish
