#!/usr/bin/env bash
# Strata's test command (README, .ci/run): set-up, then, offline,
#   1. `bazel test //...` (the whole suite) but the loaded twins tagged "soak" (long scenarios
#      whose quiet twin runs here; `tools/soak.sh --loaded-twins` runs them: tests/README.md,
#      "Loaded twins in soak"), and
#   2. the unit tests (every cc_test: Catch2 tests and fuzz-corpus replays) again under
#      AddressSanitizer + UndefinedBehaviorSanitizer (--config=asan_ubsan), except those tagged
#      "timing" (rate and CPU-clock checks, which a 2-5x sanitizer slowdown invalidates). The
#      whole suite under sanitizers is run by hand (docs/reliability.md "Sanitizers"), and
#   3. //tests/install:base_size_test in an optimised build (-c opt): the stripped
#      libstrata_base.so stays within 512 KiB.
# Ends with the plain line "N passed, N failed": both runs' per-target results added up, and
# exits non-zero on any failure (including a build that fails before tests run).
# With arguments, only `bazel test //...` runs, with them (for example --config=tsan).
# STRATA_TEST_SANITIZERS=0 skips step 2.
set -uo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

flags=(--keep_going --test_summary=short)
if [[ "${CI:-}" == "true" ]]; then flags+=(--config=ci); fi

log=$(mktemp /tmp/strata-test.XXXXXX)
trap 'rm -f "$log"' EXIT
total_passed=0
total_failed=0

# run_suite LABEL BAZEL_TEST_ARGS...: one `bazel test`, its counts added to the totals.
run_suite() {
  local label="$1"
  shift
  local start=$SECONDS
  bazel test "$@" 2>&1 | tee "$log"
  local bazel_rc=${PIPESTATUS[0]}
  local passed failed
  passed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?PASSED' "$log")
  failed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' "$log")
  if [[ $bazel_rc -ne 0 && $failed -eq 0 ]]; then
    # Bazel failed without naming a failing test (analysis or build error): count it.
    failed=1
  fi
  echo "${label}: ${passed} passed, ${failed} failed ($((SECONDS - start)) s)"
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
}

if [[ $# -gt 0 ]]; then
  run_suite "bazel test //... $*" //... "${flags[@]}" "$@"
else
  # Three tests at a time on CI's 2 cores: most scenarios wait (attaches, waits, sleeps, the
  # front-end's import) more than they run, and every test holds beside other work
  # (tests/README.md, "Beside any load"); tools/load.sh's 4 busy processes are more than one
  # more test's share. (--local_test_jobs alone still ran two: Bazel 4 also needs --jobs above
  # it, measured; compiles may then run up to four at a time too, which costs the 2 CPUs
  # little against the tests waited for.)
  run_suite "whole suite" //... "${flags[@]}" --test_tag_filters=-soak --jobs=4 --local_test_jobs=3
  if [[ "${STRATA_TEST_SANITIZERS:-1}" != 0 ]]; then
    run_suite "unit tests under ASan+UBSan" //... "${flags[@]}" --config=asan_ubsan \
      --build_tests_only --test_lang_filters=cc --test_tag_filters=-timing
  fi
  run_suite "library size (-c opt)" //tests/install:base_size_test "${flags[@]}" -c opt
fi
echo "${total_passed} passed, ${total_failed} failed"
[[ $total_failed -eq 0 ]]
