#!/usr/bin/env bash
# 100 attach/detach cycles (issue 36): //tests/attach:attach_test with ATTACH_CYCLES=N
# (default 100; CI runs 20): descriptors as before, RSS grown by less than the library's file,
# the server's replies still correct, and the test's other checks.
#   tools/attach_cycles.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
exec bazel test //tests/attach:attach_test --test_output=all --test_env=ATTACH_CYCLES="${1:-100}" --nocache_test_results
