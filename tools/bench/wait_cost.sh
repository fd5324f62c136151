#!/usr/bin/env bash
# Cost of wait stacks on short blocking calls (issue 18; docs/benchmarks.md, "Wait stacks:
# cost"): pipe_ping_pong preloaded with libstrata_base.so (STRATA_STARTUP=1), wait stacks on
# against off (STRATA_STARTUP_FEATURES=-waitstacks), in interleaved rounds; prints each run
# and the medians of the process CPU time and wall time.
#
#   tools/bench/wait_cost.sh [ROUNDS] [ROUND_TRIPS]      defaults: 15, 200000
# WAIT_COST_CPU=N pins the runs to CPU N (both threads on one CPU: no cross-CPU wake-ups,
# steadier on a shared machine).
# Build first: bazel build -c opt //tools/bench:pipe_ping_pong //base:libstrata_base.so
set -euo pipefail
rounds="${1:-15}"
trips="${2:-200000}"
bin="${STRATA_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/bazel-bin}"
program="$bin/tools/bench/pipe_ping_pong"
library="$bin/base/libstrata_base.so"
out="$(mktemp -d)"
for ((i = 0; i < rounds; i++)); do
  for mode in on off; do
    features=""
    [[ $mode == off ]] && features="-waitstacks"
    env LD_PRELOAD="$library" STRATA_STARTUP=1 STRATA_STARTUP_FEATURES="$features" \
      STRATA_SHUTDOWN="$out/profile.json" ${WAIT_COST_CPU:+taskset -c "$WAIT_COST_CPU"} "$program" "$trips" | tee -a "$out/$mode.txt" |
      sed "s/^/$mode /"
  done
done
median() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" "$2" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for key in cpu_s wall_s; do
  on=$(median "$key" "$out/on.txt")
  off=$(median "$key" "$out/off.txt")
  awk -v k="$key" -v a="$on" -v b="$off" \
    'BEGIN { printf "median %s: wait stacks on %.4f, off %.4f: %+.2f %%\n", k, a, b, 100 * (a - b) / b }'
done
rm -rf "$out"
