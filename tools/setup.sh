#!/usr/bin/env bash
# Installs every Debian package Strata's build, demo and tests need, then the npm packages of
# the front-end import test. Idempotent: when everything is present it only checks and
# returns. Needs root (apt-get) when something is missing. Bazel then builds fully offline
# (see tools/bazel/README.md).
set -euo pipefail

PACKAGES=(
  bazel-bootstrap      # Bazel 4.2.3 (prints "no_version"; that is normal)
  bazel-platforms      # @platforms, used offline from /usr/share/bazel/tools/platforms
  patchelf             # tools/install.sh: SONAMEs and RUNPATHs of the installed libraries
  cmake                # tests/install: the CMake example against an installed Strata
  pkgconf              # tests/install: the Make example (pkg-config)
  strace               # tests/sleeper_test: counts signals delivered to blocked threads
  g++
  libabsl-dev          # abseil 20220623
  libunwind-dev        # libunwind 1.6.2
  rapidjson-dev        # RapidJSON 1.1.0 (header-only)
  catch2               # Catch2 2.13 single header
  libbenchmark-dev     # Google Benchmark 1.7.1
  libdw-dev            # elfutils libdw (symbolication)
  debuginfod           # a local debuginfod server and debuginfod-find (tests/symbols)
  libelf-dev
  nodejs               # Node.js for the front-end import test (npm comes with it here)
  libgoogle-perftools-dev  # gperftools 2.10: CPU-profiler baseline in tests/ scenarios
  libcli11-dev         # CLI11 2.1 (header-only): the strata command's argument parsing
  zlib1g-dev           # zlib: .json.gz profiles and pprof output of the strata command
  chromium             # headless browser: tests/cli loads strata's HTML report
  libmozjs-102-dev     # SpiderMonkey 102: JS stacks (full/script/spidermonkey, strata js)
  llvm                 # llvm-symbolizer: tests/symbols compares every inline chain with it
  clang                # tests/install: the public headers and examples also build with clang++
  golang-go            # `go tool pprof`: tests/cli reads strata's pprof output with it
  lintian              # tests/install/deb_test: 0 errors on every Debian package
  libtcmalloc-minimal4 # tests/native_allocations: the hooks in front of tcmalloc
  libjemalloc2         # tests/native_allocations: the hooks in front of jemalloc
  heaptrack            # tools/bench.sh: native allocation profiling cost, side by side
  valgrind             # tests/host_safety/small: a preloaded program runs under Valgrind
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "setup: installing missing Debian packages: ${missing[*]}" >&2
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
    $SUDO apt-get update >&2
    $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2
  fi
fi

# npm packages of the front-end import test (tests/frontend): the Firefox Profiler's own
# profile importer, @firefox-devtools/profiler-cli, pinned by tests/frontend/package-lock.json.
# Idempotent: nothing happens when node_modules was installed from this very lock file (a
# stamp holds the lock file's hash); otherwise `npm ci`. A missing npm or a failed install
# (no network) only warns: everything else builds, and that one test says what is missing.
frontend_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/frontend"
if [[ -f "$frontend_dir/package-lock.json" ]]; then
  lock_hash=$(sha256sum "$frontend_dir/package-lock.json" | cut -d' ' -f1)
  stamp="$frontend_dir/node_modules/.strata-package-lock.sha256"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$lock_hash" &&
        -f "$frontend_dir/node_modules/@firefox-devtools/profiler-cli/dist/profiler-cli.js" ]]; then
    :  # Installed and matching.
  elif ! command -v npm >/dev/null; then
    echo "setup: warning: npm not found; //tests/frontend:frontend_import_test will fail" >&2
  elif (cd "$frontend_dir" && npm ci --no-audit --no-fund --loglevel=error >&2); then
    echo "$lock_hash" >"$stamp"
  else
    echo "setup: warning: npm ci failed in $frontend_dir;" \
      "//tests/frontend:frontend_import_test will fail" >&2
  fi
fi
