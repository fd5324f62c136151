#!/usr/bin/env bash
# Bazel wrapper for the front-end tests:  node_test.sh SCRIPT.js PROFILE_MAKER
# Runs tests/frontend/SCRIPT.js with PROFILE_MAKER (a runfiles path of the program writing its
# profiles), the format checker, profiler-cli and a work directory. Finds node, the profiler-cli package that
# tools/setup.sh installs into tests/frontend/node_modules of the source tree (found through
# the runfiles symlink of package.json, so the test must run unsandboxed: tags "local"), and
# gives profiler-cli a private, short session directory (its Unix socket paths are limited to
# 108 bytes), stopping every daemon it started on exit.
set -euo pipefail

root="${TEST_SRCDIR:?run me with bazel test}/${TEST_WORKSPACE:-strata}"
source_dir=$(dirname "$(readlink -f "$root/tests/frontend/package.json")")
cli="$source_dir/node_modules/@firefox-devtools/profiler-cli/dist/profiler-cli.js"
if ! command -v node >/dev/null; then
  echo "$1: node is not installed (tools/setup.sh)" >&2
  exit 1
fi
if [[ ! -f "$cli" ]]; then
  echo "$1: $cli is missing; run tools/setup.sh (npm ci in tests/frontend)" >&2
  exit 1
fi

session_dir=$(mktemp -d /tmp/strata-pq.XXXXXX)
export PROFILER_CLI_SESSION_DIR="$session_dir"
cleanup() {
  node "$cli" stop --all >/dev/null 2>&1 || true
  rm -rf "$session_dir"
}
trap cleanup EXIT

work="${TEST_TMPDIR:-$(mktemp -d)}"
node "$root/tests/frontend/$1" \
  "$root/$2" \
  "$root/tests/format/gecko_profile_check" \
  "$cli" "$work"
