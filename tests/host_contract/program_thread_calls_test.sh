#!/usr/bin/env bash
# Runs program_thread_calls.py on the built libstrata_base.so (see its docstring).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
runfiles="${RUNFILES_DIR:-${TEST_SRCDIR:-}}/strata"
[[ -d "$runfiles" ]] || runfiles="$here/../../bazel-bin"
script="$runfiles/tests/host_contract/program_thread_calls.py"
[[ -f "$script" ]] || script="$here/program_thread_calls.py"
exec python3 "$script" "$runfiles/base/libstrata_base.so"
