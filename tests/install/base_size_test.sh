#!/usr/bin/env bash
# libstrata_base.so stays small (issue 19): stripped, the optimised build is at most 512 KiB.
# The preloaded library is mapped into every process of a `strata record` tree; cold code is
# compiled with -Os (.bazelrc) and the C++ symbols nothing outside it uses are kept local
# (base/libstrata_base.lds, tools/base_local_symbols.py) to keep it there: 473 976 bytes on
# 2026-12-06 (docs/benchmarks.md, "Library size"). Only an optimised build is meaningful, so
# this test is tagged manual and tools/test.sh runs it with `-c opt`; run by hand:
#   bazel test -c opt //tests/install:base_size_test
set -uo pipefail
mode="$1"
library="$2"
limit=$((512 * 1024))
if [[ "$mode" != opt ]]; then
  echo "FAIL: built with -c $mode; the size goal is for -c opt (bazel test -c opt $TEST_TARGET)"
  exit 1
fi
stripped="${TEST_TMPDIR:-/tmp}/libstrata_base.stripped.so"
if ! strip -o "$stripped" "$library"; then
  echo "FAIL: strip $library failed"
  exit 1
fi
size=$(stat -c %s "$stripped")
echo "libstrata_base.so: $(stat -L -c %s "$library") bytes with debug info, $size stripped (limit $limit)"
size -A "$stripped" | sort -k2 -n | tail -6
if ((size > limit)); then
  echo "FAIL: stripped libstrata_base.so is $size bytes, over $limit"
  exit 1
fi
echo "PASS"
