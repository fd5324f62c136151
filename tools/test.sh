#!/usr/bin/env bash
# Strata's test command (README, .ci/run): set-up, then `bazel test //...` offline.
# Ends with the plain line "N passed, N failed" counted from Bazel's per-target results
# and exits non-zero on any failure (including a build that fails before tests run).
# Extra arguments go to `bazel test` (for example --config=asan).
set -uo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

flags=(--keep_going --test_summary=short)
if [[ "${CI:-}" == "true" ]]; then flags+=(--config=ci); fi

log=$(mktemp /tmp/strata-test.XXXXXX)
trap 'rm -f "$log"' EXIT
bazel test //... "${flags[@]}" "$@" 2>&1 | tee "$log"
bazel_rc=${PIPESTATUS[0]}

passed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' "$log")
if [[ $bazel_rc -ne 0 && $failed -eq 0 ]]; then
  # Bazel failed without naming a failing test (analysis or build error): count it.
  failed=1
fi
echo "${passed} passed, ${failed} failed"
[[ $failed -eq 0 ]]
