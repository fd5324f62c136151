#!/usr/bin/env bash
# Strata's descriptors and the program's RLIMIT_NOFILE (issue 33; docs/host-contract.md):
# descriptor_share_program keeps THREADS threads alive and opens /dev/null until EMFILE,
# plain and preloaded, at `ulimit -n 64` with 20 threads and `ulimit -n 1024` with 200. The
# preloaded run must open at least as many files as the plain run less Strata's share (a
# sixteenth of the soft limit: its perf events stop there and later threads get CPU-clock
# timers, which take no descriptor), exit 0 with the same status, and its profile must say
# which threads fell back and why (samplingSource). Before: 39 opens instead of 60 at 64.
source "$(dirname "$0")/../scenario_lib.sh"

program="$(binary tests/host_contract/descriptor_share_program)"

for setup in "64 20" "1024 200"; do
  read -r limit threads <<<"$setup"
  share=$((limit / 16))
  plain_out=$( (ulimit -n "$limit" && timeout -s KILL 120 "$program" "$threads") 2>&1)
  plain_status=$?
  plain_opened=$(sed -n 's/^descriptor_share: opened=//p' <<<"$plain_out")
  name="limit_$limit"
  (ulimit -n "$limit" && timeout -s KILL 120 env LD_PRELOAD="$STRATA_PRELOAD" STRATA_STARTUP=1 \
    STRATA_SHUTDOWN="$OUT/$name.json" "$program" "$threads") >"$WORK/$name.out" 2>"$WORK/$name.err"
  RUN_STATUS=$?
  opened=$(sed -n 's/^descriptor_share: opened=//p' "$WORK/$name.out")
  result "scenario=descriptor-share limit=$limit threads=$threads plain_opened=$plain_opened opened=$opened share=$share status=$RUN_STATUS"
  if [[ $plain_status -ne 0 || -z "$plain_opened" ]]; then
    fail "$name: the plain run failed ($plain_status): $plain_out"
    continue
  fi
  if [[ $RUN_STATUS -ne 0 || -z "$opened" ]]; then
    fail "$name: status $RUN_STATUS (plain 0)"
    sed 's/^/    /' "$WORK/$name.err" | head -10
    continue
  fi
  if ((opened >= plain_opened - share)); then
    pass "$name: the program opened $opened files, $plain_opened plain (Strata's share: $share)"
  else
    fail "$name: the program opened $opened files, $plain_opened plain: Strata took more than its share ($share)"
  fi
  check_format "$name"
  source_text=$(python3 -c '
import json, sys
logs = list(json.load(open(sys.argv[1])).get("profilingLog", {}).values())
print(logs[0].get("samplingSource", "") if logs else "")' \
    "$OUT/$name.json")
  result "scenario=descriptor-share limit=$limit samplingSource=\"$source_text\""
  if ((threads + 1 > share)); then
    if [[ "$source_text" == *"Strata's share of descriptors"* ]]; then
      pass "$name: samplingSource says why threads got timers: $source_text"
    else
      fail "$name: samplingSource does not name the descriptor share: '$source_text'"
    fi
  fi
done
finish
