#!/usr/bin/env bash
# Builds the Debian package strata_VERSION_amd64.deb from the install layout (docs/install.md):
# tools/install_tree.sh into a staging /usr, then dpkg-deb. Install it with
#   apt-get install ./strata_VERSION_amd64.deb        (remove: apt-get remove strata)
#
# Usage: tools/make_deb.sh [--build-root DIR] [OUTDIR]
#   Without --build-root it runs tools/setup.sh and `bazel build -c opt` (offline) first, as
#   tools/install.sh does; with it, DIR holds the built files (bazel-bin layout; tests).
#   The .deb goes to OUTDIR (default: the current directory); its path is printed last.
#
# The package: /usr/bin/strata and strata_js; /usr/lib/libstrata_*.so* (stripped) and
# libstrata_record.so; debug info in /usr/lib/debug/.build-id/ (where gdb and Strata's own
# symbolizer look); /usr/include/strata/; /usr/lib/pkgconfig/strata-*.pc;
# /usr/lib/cmake/Strata/. Depends: the shared libraries' packages (dpkg-shlibdeps), libunwind8
# (dlopened by the base tier) and libabsl-dev (the public headers include abseil's).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

build_root=""
if [[ "${1:-}" == "--build-root" ]]; then
  build_root="$(cd "$2" && pwd)"
  shift 2
fi
out_dir="$(mkdir -p "${1:-.}" && cd "${1:-.}" && pwd)"
for tool in dpkg-deb dpkg-shlibdeps fakeroot; do
  command -v "$tool" >/dev/null || { echo "make_deb: $tool not found (Debian dpkg-dev, fakeroot)" >&2; exit 1; }
done

if [[ -z "$build_root" ]]; then
  (cd "$repo" && tools/setup.sh &&
   bazel build -c opt //base:libstrata_base.so //full:libstrata_full.so \
     //full/script/spidermonkey:libstrata_spidermonkey.so //tools/strata:strata \
     //tools/strata:libstrata_record.so //tools/js:strata_js)
  build_root="$(cd "$repo" && bazel info -c opt bazel-bin 2>/dev/null)"
fi

version="$(tr -d ' \n' <"$repo/VERSION")"
work="$(mktemp -d /tmp/strata-deb.XXXXXX)"
trap 'rm -rf "$work"' EXIT
stage="$work/strata_${version}_amd64"

bash "$repo/tools/install_tree.sh" --no-rpath-flags --final-prefix=/usr "$build_root" "$repo" "$stage/usr" >&2
# Under /usr the debug files are found by build-id in /usr/lib/debug; no lib/.debug/ links.
rm -rf "$stage/usr/lib/.debug"
mkdir -p "$stage/usr/share/doc/strata"
cat >"$stage/usr/share/doc/strata/README" <<EOF
Strata $version: an in-process sampling profiler for C++ on Linux.
Use: strata record -o profile.json -- PROGRAM ARGS; open the profile at
https://profiler.firefox.com. Build against it with pkg-config (strata-base, strata-full,
strata-spidermonkey) or CMake (find_package(Strata): Strata::base, Strata::full,
Strata::spidermonkey). Debug info: /usr/lib/debug/.build-id/.
EOF

# Dependencies of the ELF files, our own libraries excepted.
mkdir -p "$work/shlibs/debian"
printf 'Source: strata\n\nPackage: strata\nArchitecture: amd64\n' >"$work/shlibs/debian/control"
printf 'libstrata_base %s strata\nlibstrata_full %s strata\nlibstrata_spidermonkey %s strata\n' \
  "${version%%.*}" "${version%%.*}" "${version%%.*}" >"$work/shlibs/debian/shlibs.local"
elf_files=("$stage"/usr/lib/libstrata_*.so."$version" "$stage/usr/lib/libstrata_record.so" "$stage"/usr/bin/*)
shlib_depends="$(cd "$work/shlibs" &&
  dpkg-shlibdeps -O -xstrata -l"$stage/usr/lib" "${elf_files[@]}" 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')"
if [[ -z "$shlib_depends" ]]; then
  echo "make_deb: dpkg-shlibdeps found no dependencies" >&2
  exit 1
fi
installed_size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)

mkdir -p "$stage/DEBIAN"
cat >"$stage/DEBIAN/control" <<EOF
Package: strata
Version: $version
Architecture: amd64
Maintainer: Strata developers <strata@example.org>
Installed-Size: $installed_size
Depends: $shlib_depends, libunwind8, libabsl-dev
Section: devel
Priority: optional
Homepage: https://profiler.firefox.com
Description: in-process sampling profiler for C++ programs on Linux
 Strata samples native stacks (and SpiderMonkey JS stacks) with per-thread CPU-time
 sampling, and records labels, markers and counters into Gecko profiles opened by
 profiler.firefox.com. Preload libstrata_base.so into any program (strata record), or
 link it (pkg-config strata-base / strata-full, CMake find_package(Strata)).
EOF
# The loader's cache learns the new libraries in /usr/lib.
echo "activate-noawait ldconfig" >"$stage/DEBIAN/triggers"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/triggers"

deb="$out_dir/strata_${version}_amd64.deb"
fakeroot dpkg-deb --build -Zxz "$stage" "$deb" >&2
echo "$deb"
