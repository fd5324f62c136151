#!/usr/bin/env bash
# JIT code named (issue 34; docs/symbols.md "JIT code"): `node --perf-basic-prof` writes
# /tmp/perf-<pid>.map, one line per compiled function; `strata record` names the addresses in
# no module from it ("JS:*fibonacciWork /…/jit_script.js:3:… (in perf-PID.map)").
#   - the program's output and status are its plain run's;
#   - of the main thread's samples that carry CPU while it runs the script (from the first
#     sample named after the script to the last; node's own start-up and teardown are not the
#     script; a sample with a raw-address frame counts wherever it is), at least 90 % have a
#     frame named after one of the script's own functions (fibonacciWork, hotLoop), as
#     `perf report` shows them for such a run; before, they were raw addresses;
#   - of those, at least 90 % go on through the JIT frames (frame pointers) to node::Start.
# Then the same with `node --perf-prof --interpreted-frames-native-stack`, which writes a
# jitdump (jit-<pid>.dump, perf's binary format) in its working directory instead of the perf
# map: `strata record`, run in that directory, names the code from it ("… (in
# jit-PID.dump)"), with the same >= 90 % (a longer run: the jitdump's start-up writes ~2 MB).
# Both again under the preload recipe (LD_PRELOAD=libstrata_base.so STRATA_STARTUP=1
# STRATA_SHUTDOWN=...): the capture in the profiled process reads the perf map and the jitdump
# itself at the save, so the file is named without `strata symbolicate` (before: raw addresses).
source "$(dirname "$0")/../scenario_lib.sh"

STRATA="$(binary tools/strata/strata)"
BASE_LIBRARY="$(binary base/libstrata_base.so)"
script="$(cd "$(dirname "$0")" && pwd)/jit_script.js"
[[ -f "$script" ]] || script="$(binary tests/symbols/jit_script.js)"
command -v node >/dev/null || { fail "node is missing (tools/setup.sh installs nodejs)"; finish; }

# record_and_check NAME CPU_MS MODE NODE_FLAGS...: records the script in $WORK/NAME (its
# working directory) under `strata record` (MODE record) or the preload recipe (MODE
# preload: named at capture), then checks the share of named running samples.
record_and_check() {
  local name="$1" cpu_ms="$2" mode="$3"
  shift 3
  mkdir -p "$WORK/$name"
  node "$script" "$cpu_ms" >"$WORK/$name.plain.out" 2>&1 || fail "$name: plain run failed: $(cat "$WORK/$name.plain.out")"
  if [[ $mode == preload ]]; then
    (cd "$WORK/$name" && env "${SANITIZER_ENV[@]}" LD_PRELOAD="$BASE_LIBRARY" STRATA_STARTUP=1 \
      STRATA_SHUTDOWN="$OUT/$name.json" node "$@" "$script" "$cpu_ms" \
      >"$WORK/$name.record.out" 2>"$WORK/$name.record.err")
  else
    (cd "$WORK/$name" && env "${SANITIZER_ENV[@]}" "$STRATA" record -o "$OUT/$name.json" -- node "$@" "$script" "$cpu_ms" \
      >"$WORK/$name.record.out" 2>"$WORK/$name.record.err")
  fi
  local status=$?
  local pids
  pids=$(python3 -c "
import json,sys
p=json.load(open(sys.argv[1]))
def walk(q):
    for t in q.get('threads',[]): yield t['pid']
    for c in q.get('processes',[]): yield from walk(c)
print(' '.join(sorted({str(x) for x in walk(p)})))" "$OUT/$name.json" 2>/dev/null)
  for pid in $pids; do rm -f "/tmp/perf-$pid.map"; done
  rm -rf "$WORK/$name"
  [[ $status -eq 0 ]] || { fail "$name: $mode: status $status: $(tail -3 "$WORK/$name.record.err")"; return; }
  cmp -s "$WORK/$name.plain.out" "$WORK/$name.record.out" && pass "$name: output as plain" \
    || fail "$name: output differs: $(cat "$WORK/$name.record.out")"
  check_format "$name"
  python3 - "$OUT/$name.json" >"$WORK/$name.share.out" <<'PY'
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
# The script's run: from its first named sample to its last. node's own start-up and
# teardown (V8's snapshot deserializer, OpenSSL's set-up, the isolate's end: ~110 running
# samples, 13 % of an 800 ms script beside a load average of 18) are not the script. A
# sample with a raw-address frame (JIT code left unnamed) counts wherever it is.
raw = {}
def unnamed_code(s):
    if s is None: return False
    if s not in raw:
        raw[s] = st[ft["data"][sk["data"][s][frame]][loc]].startswith("0x") or unnamed_code(sk["data"][s][prefix])
    return raw[s]
named_at = [i for i, r in enumerate(running) if named(r[scol])]
if named_at:
    running = [r for i, r in enumerate(running)
               if named_at[0] <= i <= named_at[-1] or unnamed_code(r[scol])]
hits = sum(1 for r in running if named(r[scol]))
# The walk went on through the JIT frames (V8 keeps frame pointers): node's own native
# frames (node::Start) below the script's, at the root.
def through(s):
    names = []
    while s is not None:
        names.append(st[ft["data"][sk["data"][s][frame]][loc]])
        s = sk["data"][s][prefix]
    script = [i for i, text in enumerate(names) if "jit_script.js" in text]
    return bool(script) and any(text.startswith("node::Start(") for text in names[script[-1]:])
print(len(running), hits, sum(1 for r in running if named(r[scol]) and through(r[scol])))
PY
  local running hits rooted
  read -r running hits rooted <"$WORK/$name.share.out"
  result "scenario=jit-$name running_samples_in_script=$running named_by_script=$hits walked_through_to_node_start=$rooted"
  if skip_under_tsan "$name: >= 90 % of named samples reach node::Start ($rooted of $hits)"; then
    :
  elif [[ "${hits:-0}" -gt 0 ]] && (( rooted * 100 >= hits * 90 )); then
    pass "$name: $rooted of the $hits named samples go on through the JIT frames to node::Start"
  else
    fail "$name: ${rooted:-0} of ${hits:-0} named samples reach node::Start below the JIT frames (want >= 90 %)"
  fi
  if skip_under_tsan "$name: >= 90 % of running samples named by the script ($hits of $running)"; then
    :
  elif [[ "${running:-0}" -gt 0 ]] && (( hits * 100 >= running * 90 )); then
    pass "$name: $hits of $running running samples of the JS thread carry the script's function names"
  else
    fail "$name: ${hits:-0} of ${running:-0} running samples carry the script's function names (want >= 90 %)"
  fi
}

record_and_check node 800 record --perf-basic-prof
record_and_check node_preload 800 preload --perf-basic-prof
# Under TSan node's own jitdump writer fails without Strata: `LD_PRELOAD=libtsan.so.2 node
# --perf-prof --interpreted-frames-native-stack jit_script.js 1600` ends with status 66, a
# heap-use-after-free in v8::internal::LinuxPerfJitLogger::LogWriteDebugInfo.
if ((UNDER_TSAN)); then
  echo "skipped under TSan: node_jitdump, node_jitdump_preload (TSan's runtime reports node's own jitdump writer, without Strata)"
else
  record_and_check node_jitdump 1600 record --perf-prof --interpreted-frames-native-stack
  record_and_check node_jitdump_preload 1600 preload --perf-prof --interpreted-frames-native-stack
fi
finish
