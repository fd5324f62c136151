#!/usr/bin/env bash
# System V signal functions over every signal (issue 33; docs/host-contract.md):
# sysv_signals_program calls sigset (SIG_DFL, SIG_HOLD, SIG_DFL), sighold, sigrelse on every
# signal and sigignore on every real-time one, then spins 0.4 s of its CPU in
# spin_after_sysv_calls. Plain, preloaded (perf events, CPU-clock timers, precise) and under
# `strata record`: the same status (0) and output as plain, and the profile still samples
# after the calls (the spin has samples). Before: killed by the sampling signal (8 of 8).
source "$(dirname "$0")/../scenario_lib.sh"

program="$(binary tests/host_contract/sysv_signals_program)"
STRATA="$(binary tools/strata/strata)"

plain_out=$(timeout -s KILL 60 "$program" 2>&1)
plain_status=$?
echo "    $plain_out"
[[ $plain_status -eq 0 ]] || { fail "plain run: status $plain_status"; finish; }

spin_samples() {  # PROFILE: samples whose stack has spin_after_sysv_calls (Gecko format)
  python3 - "$1" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
def col(table, name):
    s = table["schema"]
    return s[name] if isinstance(s, dict) else s.index(name)
count = 0
for t in p["threads"]:
    strings = t["stringTable"]
    frames, stacks, samples = t["frameTable"], t["stackTable"], t["samples"]
    f_location = col(frames, "location")
    s_prefix, s_frame = col(stacks, "prefix"), col(stacks, "frame")
    hit = {}
    def has(stack):
        while stack is not None:
            if stack in hit:
                return hit[stack]
            row = stacks["data"][stack]
            if "spin_after_sysv_calls" in strings[frames["data"][row[s_frame]][f_location]]:
                return True
            stack = row[s_prefix]
        return False
    s_stack = col(samples, "stack")
    count += sum(1 for r in samples["data"] if has(r[s_stack]))
print(count)
PY
}

check() {  # NAME
  local name="$1"
  result "scenario=sysv-signals run=$name status=$RUN_STATUS"
  if [[ $RUN_STATUS -ne 0 ]]; then
    fail "$name: status $RUN_STATUS (plain 0)"
    sed 's/^/    /' "$WORK/$name.err" | head -10
    return
  fi
  if [[ "$(cat "$WORK/$name.out")" == "$plain_out" ]]; then
    pass "$name: status 0 and output as plain"
  else
    fail "$name: output '$(cat "$WORK/$name.out")', plain '$plain_out'"
  fi
  check_format "$name"
  local spins
  spins=$(spin_samples "$OUT/$name.json")
  if [[ "$spins" -gt 0 ]]; then
    pass "$name: still sampled after the calls ($spins samples in spin_after_sysv_calls)"
  else
    fail "$name: no sample in spin_after_sysv_calls: sampling stopped"
  fi
}

run_with() {  # NAME ENV...
  local name="$1"
  shift
  timeout -s KILL 60 env "$@" LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
    STRATA_SHUTDOWN="$OUT/$name.json" "$program" >"$WORK/$name.out" 2>"$WORK/$name.err"
  RUN_STATUS=$?
  check "$name"
}

run_with perf
run_with timer STRATA_SAMPLING_SOURCE=timer
run_with precise STRATA_STARTUP_FEATURES=stackwalk,threads,cpu,precise
env "${SANITIZER_ENV[@]}" timeout -s KILL 60 "$STRATA" record -o "$OUT/record.json" -- "$program" \
  >"$WORK/record.out" 2>"$WORK/record.err"
RUN_STATUS=$?
check record
finish
