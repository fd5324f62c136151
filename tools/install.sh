#!/usr/bin/env bash
# Installs Strata under PREFIX (docs/install.md): builds the libraries, `strata` and
# `strata_js` optimised (`bazel build -c opt`, offline), then lays them out with
# tools/install_tree.sh: bin/, lib/ (versioned, stripped; debug info in lib/debug/.build-id/),
# include/strata/, lib/pkgconfig/, lib/cmake/Strata/.
#
# Usage: tools/install.sh [--no-rpath-flags] [--final-prefix=DIR] PREFIX      e.g. tools/install.sh ~/.local
# Runs tools/setup.sh first (Debian packages, idempotent). Extra Bazel flags: STRATA_BAZEL_FLAGS.
set -euo pipefail

if [[ $# -lt 1 || "${*: -1}" == -* ]]; then
  echo "usage: $0 [--no-rpath-flags] [--final-prefix=DIR] PREFIX" >&2
  exit 2
fi
prefix="${*: -1}"
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"  # Relative to where it was called, before the cd below.
cd "$(dirname "$0")/.."
tools/setup.sh
# shellcheck disable=SC2086  # STRATA_BAZEL_FLAGS is a list of flags.
bazel build -c opt ${STRATA_BAZEL_FLAGS:-} \
  //base:libstrata_base.so //base:libstrata_alloc.so //full:libstrata_full.so \
  //full/script/spidermonkey:libstrata_spidermonkey.so \
  //tools/strata:strata //tools/strata:libstrata_record.so //tools/js:strata_js
exec tools/install_tree.sh "${@:1:$#-1}" "$(bazel info -c opt bazel-bin 2>/dev/null)" . "$prefix"
