#!/usr/bin/env bash
# The torture matrix, longer than CI runs it (issue 33; docs/host-contract.md "The torture
# matrix"): tests/torture/torture.py with random combinations of every dimension for a given
# time, or the whole product, or one combination (each failure prints its --only line).
#
#   tools/torture.sh [--seconds S] [--seed N] [--all] [--only SPEC] [--jobs N] [--keep DIR]
#
# Defaults: random combinations for 1800 s, seed 33, one at a time. --all: every combination
# (~28 000; about a day here). Builds what it needs with Bazel (offline) first. Prints one line
# per combination and ends with "torture: N combinations in S s, N failed"; exits 1 on a
# failure, whose run directory (profiles, output) is kept and named in the output.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=random
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds|--seed|--jobs|--keep|--only) args+=("$1" "$2"); shift 2 ;;
    --all) mode=all; shift ;;
    *) sed -n '2,12p' "$0"; exit 2 ;;
  esac
done
targets=(//tests/torture:torture_program //tests:deny_perf_event_open //base:libstrata_base.so
         //tools/strata //tools/strata:libstrata_record.so //tests/format:gecko_profile_check)
bazel build "${targets[@]}" >/dev/null 2>&1 || { bazel build "${targets[@]}"; exit 2; }
bin="$(bazel info bazel-bin 2>/dev/null)"
exec python3 tests/torture/torture.py --mode "$mode" \
  --program "$bin/tests/torture/torture_program" --strata "$bin/tools/strata/strata" \
  --library "$bin/base/libstrata_base.so" --check "$bin/tests/format/gecko_profile_check" \
  --deny "$bin/tests/deny_perf_event_open" "${args[@]}"
