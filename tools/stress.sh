#!/usr/bin/env bash
# The long signal-safety stress (issue 10; docs/reliability.md "Signal-safety stress"):
# tests/signal_stress_test.sh with 20 runs of 60 s (modes in turn: precise 5 kHz with
# libunwind, precise with frame pointers, default CPU-clock mode at 0.2 ms), after its
# negative control. CI runs the short version (//tests:signal_stress_test).
#
#   tools/stress.sh [--runs N] [--seconds S] [--threads-per-kind K]
#
# Needs the programs built, as in tests/README.md "Running one":
#   bazel --output_base=... build //tests:all //base:libstrata_base.so //tests/format:gecko_profile_check
#   STRATA_BIN=$(bazel --output_base=... info bazel-bin) tools/stress.sh
set -uo pipefail
cd "$(dirname "$0")/.."
exec tests/signal_stress_test.sh --runs 20 --seconds 60 "$@"
