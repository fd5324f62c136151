#!/usr/bin/env bash
# Runs program_thread_calls.py on the built libstrata_base.so (see its docstring).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
runfiles="${RUNFILES_DIR:-${TEST_SRCDIR:-}}/strata"
[[ -d "$runfiles" ]] || runfiles="$here/../../bazel-bin"
script="$runfiles/tests/host_contract/program_thread_calls.py"
[[ -f "$script" ]] || script="$here/program_thread_calls.py"
# The libunwind the walks load (libunwind_loader.h: libunwind.so.8 by its soname), if any.
libunwind=$(/sbin/ldconfig -p 2>/dev/null | awk '/libunwind\.so\.8 .*x86-64/ {print $NF; exit}')
exec python3 "$script" "$runfiles/base/libstrata_base.so" ${libunwind:+--libunwind "$libunwind"}
