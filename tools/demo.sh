#!/usr/bin/env bash
# Strata's main job (README): set-up, build everything offline, run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
flags=()
if [[ "${CI:-}" == "true" ]]; then flags+=(--config=ci); fi
bazel build "${flags[@]}" -c opt //... //tools/demo:buffer_demo
bazel-bin/tools/demo/buffer_demo
