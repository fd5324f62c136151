#!/usr/bin/env bash
# Installs every Debian package Strata's build, demo and tests need. Idempotent: when all
# packages are present it only checks and returns. Needs root (apt-get) when something is
# missing. Bazel then builds fully offline (see tools/bazel/README.md).
set -euo pipefail

PACKAGES=(
  bazel-bootstrap      # Bazel 4.2.3 (prints "no_version"; that is normal)
  bazel-platforms      # @platforms, used offline from /usr/share/bazel/tools/platforms
  g++
  libabsl-dev          # abseil 20220623
  libunwind-dev        # libunwind 1.6.2
  rapidjson-dev        # RapidJSON 1.1.0 (header-only)
  catch2               # Catch2 2.13 single header
  libbenchmark-dev     # Google Benchmark 1.7.1
  libdw-dev            # elfutils libdw (symbolication)
  libelf-dev
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup: installing missing Debian packages: ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
  $SUDO apt-get update >&2
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi
