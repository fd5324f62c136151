#!/usr/bin/env bash
# Bazel wrapper for typed_marker_test.js (see frontend_import_test.sh for why it runs
# unsandboxed and how it finds profiler-cli): a private session directory, every daemon it
# started stopped on exit.
set -euo pipefail

root="${TEST_SRCDIR:?run me with bazel test}/${TEST_WORKSPACE:-strata}"
source_dir=$(dirname "$(readlink -f "$root/tests/frontend/package.json")")
cli="$source_dir/node_modules/@firefox-devtools/profiler-cli/dist/profiler-cli.js"
if ! command -v node >/dev/null; then
  echo "typed_marker_test: node is not installed (tools/setup.sh)" >&2
  exit 1
fi
if [[ ! -f "$cli" ]]; then
  echo "typed_marker_test: $cli is missing; run tools/setup.sh (npm ci in tests/frontend)" >&2
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
node "$root/tests/frontend/typed_marker_test.js" \
  "$root/tests/frontend/typed_marker_profile" \
  "$root/tests/format/gecko_profile_check" \
  "$cli" "$work"
