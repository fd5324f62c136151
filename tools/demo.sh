#!/usr/bin/env bash
# Strata's main job (README): set-up, build the libraries and tools offline (optimised), then run the demo program with
# the base tier preloaded, write its profile and print a summary of it.
#   tools/demo.sh [OUTPUT.json]     (default: strata-demo-profile.json in the current directory)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="$(realpath -m "${1:-strata-demo-profile.json}")"
cd "$repo"
tools/setup.sh
flags=(-c opt)
if [[ "${CI:-}" == "true" ]]; then flags+=(--config=ci); fi
bazel build "${flags[@]}" //base:libstrata_base.so //full:libstrata_full.so //tools/demo:strata_demo \
  //tools/demo:strata_tree_demo //tools/strata:strata
bin="$(bazel info "${flags[@]}" bazel-bin 2>/dev/null)"

echo "== running the demo with libstrata_base.so preloaded =="
LD_PRELOAD="$bin/base/libstrata_base.so" STRATA_STARTUP=1 STRATA_SHUTDOWN="$out" \
  "$bin/tools/demo/strata_demo" 2
echo "== profile written to $out (open it at https://profiler.firefox.com) =="
"$bin/tools/strata/strata" summary "$out" --top 10

echo "== the multi-process demo: a parent and two child processes, one session, one profile =="
"$bin/tools/demo/strata_tree_demo" 2 "${out%.json}-tree.json"
