#!/usr/bin/env bash
# ThreadSanitizer runs, by hand (docs/reliability.md "Sanitizers"; not part of CI: the TSan
# build of the unit tests plus their run adds more than the ~6 minutes CI has left, see there).
#
#   tools/tsan.sh          the unit tests (every cc_test not tagged "timing" or "no_tsan") under
#                          --config=tsan: what would be CI's TSan step. 3.5-11 min of tests on
#                          the 2 shared cores (load 13-33), plus the TSan build (~17 min cold).
#   tools/tsan.sh --all    the whole suite, scenarios included (tools/test.sh --config=tsan).
#
# Any ThreadSanitizer report fails its test (TSAN_OPTIONS=halt_on_error=1, .bazelrc). Ends
# with the plain line "N passed, N failed" and exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--all" ]]; then
  shift
  exec tools/test.sh --config=tsan "$@"
fi

tools/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }
flags=(--keep_going --test_summary=short --config=tsan --build_tests_only
       --test_lang_filters=cc --test_tag_filters=-timing,-no_tsan)
if [[ "${CI:-}" == "true" ]]; then flags+=(--config=ci); fi
log=$(mktemp /tmp/strata-tsan.XXXXXX)
trap 'rm -f "$log"' EXIT
start=$SECONDS
bazel test //... "${flags[@]}" "$@" 2>&1 | tee "$log"
bazel_rc=${PIPESTATUS[0]}
passed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) +)?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' "$log")
if [[ $bazel_rc -ne 0 && $failed -eq 0 ]]; then failed=1; fi
echo "unit tests under TSan: ${passed} passed, ${failed} failed ($((SECONDS - start)) s)"
echo "${passed} passed, ${failed} failed"
[[ $failed -eq 0 ]]
