#!/usr/bin/env bash
# Lays out an installed Strata under PREFIX from already built files (docs/install.md).
# tools/install.sh builds with `bazel build -c opt` and calls this; tests call it on the
# files of their own build (runfiles).
#
# Usage: tools/install_tree.sh [--no-rpath-flags] [--final-prefix=DIR] BUILD_ROOT SOURCE_ROOT PREFIX
#   BUILD_ROOT   where the built files are, as in bazel-bin: base/libstrata_base.so, base/libstrata_alloc.so,
#                full/libstrata_full.so, full/script/spidermonkey/libstrata_spidermonkey.so,
#                tools/strata/strata, tools/strata/libstrata_record.so, tools/js/strata_js
#                (strata_js is optional: without it `strata js` is not installed).
#   SOURCE_ROOT  the repository (the public headers and what they include).
#   PREFIX       the installation root; made if missing. Files already there are replaced.
#   --no-rpath-flags  pkg-config's Libs carry no -Wl,-rpath (for /usr: the .deb).
#   --final-prefix=DIR  where the tree will be in the end (the .pc files name it), when
#                PREFIX is a staging directory (tools/make_deb.sh); default PREFIX.
#
# What it makes (VERSION from the file VERSION, SOVERSION its first number):
#   bin/strata, bin/strata_js                    RUNPATH $ORIGIN/../lib
#   lib/libstrata_{base,full,spidermonkey}.so.VERSION, SONAME .so.SOVERSION, symlinks
#       .so.SOVERSION and .so; RUNPATH $ORIGIN (full, spidermonkey: base needs none); lib/libstrata_record.so (preloaded by
#       `strata record`)
#   every ELF stripped; its debug info in lib/debug/.build-id/xx/yyyy.debug (gdb and
#   Strata's symbolizer look there under /usr/lib/debug) with a .gnu_debuglink, and
#   lib/.debug/<file>.debug pointing at it (found beside the file for any PREFIX)
#   include/strata/*.h: the public headers; what they include from platform/ and shared/
#       under include/strata/internal/, every quoted include rewritten to <strata/...>
#   lib/pkgconfig/strata-{base,full,spidermonkey}.pc
#   lib/cmake/Strata/StrataConfig.cmake, StrataConfigVersion.cmake
# Needs patchelf, objcopy, strip (Debian patchelf, binutils; tools/setup.sh installs them).
set -euo pipefail

rpath_flags=1
final_prefix=""
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --no-rpath-flags) rpath_flags=0; shift ;;
    --final-prefix=*) final_prefix="${1#--final-prefix=}"; shift ;;
    *) echo "install: unknown option $1" >&2; exit 2 ;;
  esac
done
if [[ $# -ne 3 ]]; then
  echo "usage: $0 [--no-rpath-flags] [--final-prefix=DIR] BUILD_ROOT SOURCE_ROOT PREFIX" >&2
  exit 2
fi
build_root="$(cd "$1" && pwd)"
source_root="$(cd "$2" && pwd)"
mkdir -p "$3"
prefix="$(cd "$3" && pwd)"
final_prefix="${final_prefix:-$prefix}"

for tool in patchelf objcopy strip readelf; do
  command -v "$tool" >/dev/null || { echo "install: $tool not found (run tools/setup.sh)" >&2; exit 1; }
done

version="$(tr -d ' \n' <"$source_root/VERSION")"
soversion="${version%%.*}"
libdir="$prefix/lib"
mkdir -p "$prefix/bin" "$libdir/pkgconfig" "$libdir/cmake/Strata" "$libdir/debug/.build-id" \
  "$libdir/.debug" "$prefix/include/strata"

# --- Binaries ---------------------------------------------------------------------------

# split_debug FILE: debug info to lib/debug/.build-id/xx/yyyy.debug, FILE stripped, with a
# .gnu_debuglink to it, and lib/.debug/<name>.debug -> that file.
split_debug() {
  local file="$1" name build_id debug_file
  name="$(basename "$file")"
  build_id="$(readelf -n "$file" | sed -n 's/^ *Build ID: *\([0-9a-f]*\)$/\1/p' | head -1)"
  if [[ ${#build_id} -lt 4 ]]; then
    echo "install: $file has no build-id note" >&2
    exit 1
  fi
  mkdir -p "$libdir/debug/.build-id/${build_id:0:2}"
  debug_file="$libdir/debug/.build-id/${build_id:0:2}/${build_id:2}.debug"
  rm -f "$debug_file"
  objcopy --only-keep-debug --compress-debug-sections "$file" "$debug_file"
  chmod 0644 "$debug_file"
  strip --strip-unneeded --remove-section=.comment "$file"
  # The link's name is what gdb and libdwfl look for beside the file and in its .debug/.
  ln -sfn "../debug/.build-id/${build_id:0:2}/${build_id:2}.debug" "$libdir/.debug/$name.debug"
  objcopy --add-gnu-debuglink="$debug_file" "$file"
  # objcopy names the link after debug_file's basename: make it the <name>.debug above.
  objcopy --remove-section=.gnu_debuglink "$file"
  (cd "$libdir/.debug" && objcopy --add-gnu-debuglink="$name.debug" "$file")
}

# install_library NAME DEPENDENCIES...: lib/NAME.so.VERSION with its SONAME, NEEDED entries
# of the other Strata libraries renamed to their SONAMEs, RUNPATH $ORIGIN, and symlinks.
install_library() {
  local name="$1" source="$2"
  shift 2
  local real="$libdir/$name.so.$version"
  rm -f "$real" "$libdir/$name.so.$soversion" "$libdir/$name.so"
  cp "$build_root/$source" "$real"
  chmod 0644 "$real"
  # Split first: patchelf moves the dynamic string and symbol tables into a new segment.
  split_debug "$real"
  # One change per call: patchelf 0.14 corrupts the SONAME when one call makes several. A
  # longer string moves .dynstr (and .dynsym) to a new segment, leaving the old copies
  # behind (~40 KiB each time); the shorter RUNPATH goes first and fits in place. Base has
  # no RUNPATH: it needs no library of ours (and its dlopen of libunwind must not look here).
  if [[ $# -gt 0 ]]; then patchelf --set-rpath '$ORIGIN' "$real"; fi
  patchelf --set-soname "$name.so.$soversion" "$real"
  local dependency
  for dependency in "$@"; do
    patchelf --replace-needed "$dependency.so" "$dependency.so.$soversion" "$real"
  done
  ln -s "$name.so.$version" "$libdir/$name.so.$soversion"
  ln -s "$name.so.$soversion" "$libdir/$name.so"
}

install_library libstrata_base base/libstrata_base.so
install_library libstrata_full full/libstrata_full.so libstrata_base
# The allocation hooks of the feature nativeallocations (docs/memory.md), found by `strata record`
# beside libstrata_base.so.
install_library libstrata_alloc base/libstrata_alloc.so libstrata_base
install_library libstrata_spidermonkey full/script/spidermonkey/libstrata_spidermonkey.so \
  libstrata_full libstrata_base

install -m 0644 "$build_root/tools/strata/libstrata_record.so" "$libdir/libstrata_record.so"
split_debug "$libdir/libstrata_record.so"

install -m 0755 "$build_root/tools/strata/strata" "$prefix/bin/strata"
split_debug "$prefix/bin/strata"

if [[ -f "$build_root/tools/js/strata_js" ]]; then
  install -m 0755 "$build_root/tools/js/strata_js" "$prefix/bin/strata_js"
  split_debug "$prefix/bin/strata_js"
  patchelf --set-rpath '$ORIGIN/../lib' "$prefix/bin/strata_js"
  for dependency in libstrata_spidermonkey libstrata_full libstrata_base; do
    patchelf --replace-needed "$dependency.so" "$dependency.so.$soversion" "$prefix/bin/strata_js"
  done
fi

# --- Headers ------------------------------------------------------------------------------

# Repository header -> installed name (under include/). The public ones are flat in strata/;
# what they include from platform/ and shared/ goes to strata/internal/ (not part of the
# API; included by the public headers only).
declare -A PUBLIC_HEADERS=(
  [base/categories.h]=strata/categories.h
  [base/counters.h]=strata/counters.h
  [base/labels.h]=strata/labels.h
  [base/markers.h]=strata/markers.h
  [base/profiler.h]=strata/profiler.h
  [shared/json/marker_schema.h]=strata/marker_schema.h
  [full/full.h]=strata/full.h
  [full/multiprocess.h]=strata/multiprocess.h
  [full/perfmon/perfmon.h]=strata/perfmon.h
  [full/perfmon/perfmon_c.h]=strata/perfmon_c.h
  [full/script/spidermonkey/spidermonkey.h]=strata/spidermonkey.h
  [full/script/spidermonkey/script_groups.h]=strata/script_groups.h
)

installed_name() {
  local header="$1"
  if [[ -n "${PUBLIC_HEADERS[$header]:-}" ]]; then
    echo "${PUBLIC_HEADERS[$header]}"
  else
    case "$header" in
      platform/*|shared/*) echo "strata/internal/$header" ;;
      *) echo "install: $header is included by a public header but is neither public nor" \
           "under platform/ or shared/" >&2; return 1 ;;
    esac
  fi
}

# Every repository header the public ones include, transitively (quoted includes that
# exist in the repository; "absl/..." is the system's abseil).
declare -A seen=()
queue=("${!PUBLIC_HEADERS[@]}")
headers=()
while ((${#queue[@]} > 0)); do
  header="${queue[0]}"
  queue=("${queue[@]:1}")
  [[ -n "${seen[$header]:-}" ]] && continue
  seen[$header]=1
  if [[ ! -f "$source_root/$header" ]]; then
    echo "install: missing header $source_root/$header" >&2
    exit 1
  fi
  headers+=("$header")
  while read -r included; do
    if [[ -f "$source_root/$included" || "$included" == base/* || "$included" == full/* ||
          "$included" == platform/* || "$included" == shared/* ]]; then
      queue+=("$included")
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$source_root/$header")
done

rm -rf "$prefix/include/strata"
mkdir -p "$prefix/include/strata"
sed_program=()
for header in "${headers[@]}"; do
  sed_program+=(-e "s|^\([[:space:]]*#[[:space:]]*include[[:space:]]*\)\"$header\"|\1<$(installed_name "$header")>|")
done
for header in "${headers[@]}"; do
  target="$prefix/include/$(installed_name "$header")"
  mkdir -p "$(dirname "$target")"
  sed "${sed_program[@]}" "$source_root/$header" >"$target"
  chmod 0644 "$target"
  # Anything else quoted from the repository would not be found: refuse to install it.
  if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(base|full|platform|shared)/' "$target" >&2; then
    echo "install: an include in $target was not rewritten" >&2
    exit 1
  fi
done

# --- pkg-config and CMake -------------------------------------------------------------------

# The CMake package finds the prefix from its own place (relocatable); pkg-config files name it.
rpath=""
if [[ $rpath_flags -eq 1 ]]; then rpath=' -Wl,-rpath,${libdir}'; fi
write_pc() {  # NAME DESCRIPTION REQUIRES LIBRARY
  cat >"$libdir/pkgconfig/$1.pc" <<EOF
prefix=$final_prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: $1
Description: $2
Version: $version
URL: https://profiler.firefox.com
Requires: $3
Cflags: -I\${includedir}
Libs: -L\${libdir}$rpath -l$4
EOF
}
write_pc strata-base "Strata profiler, base tier (C++17; the public headers use abseil's headers)" "" strata_base
write_pc strata-full "Strata profiler, full tier (takeover, multi-process, performance monitor)" \
  "strata-base = $version" strata_full
write_pc strata-spidermonkey "Strata profiler, SpiderMonkey 102 JS stacks" \
  "strata-full = $version, mozjs-102" strata_spidermonkey

cat >"$libdir/cmake/Strata/StrataConfig.cmake" <<EOF
# Strata $version: imported targets Strata::base, Strata::full, Strata::spidermonkey
# (docs/install.md). C++17 or later; the headers include abseil's (Debian libabsl-dev).
# COMPONENTS base, full, spidermonkey: a component that is not one of these, or whose library
# is not installed, makes the package not found (an error with REQUIRED), naming it.
get_filename_component(_strata_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
foreach(_strata_component IN LISTS Strata_FIND_COMPONENTS)
  if(NOT _strata_component MATCHES "^(base|full|spidermonkey)\$")
    set(Strata_\${_strata_component}_FOUND FALSE)
    set(_strata_why "unknown component '\${_strata_component}' (Strata's components: base, full, spidermonkey)")
  elseif(NOT EXISTS "\${_strata_prefix}/lib/libstrata_\${_strata_component}.so.$version")
    set(Strata_\${_strata_component}_FOUND FALSE)
    set(_strata_why "component '\${_strata_component}': \${_strata_prefix}/lib/libstrata_\${_strata_component}.so.$version is not installed")
  else()
    set(Strata_\${_strata_component}_FOUND TRUE)
  endif()
  if(NOT Strata_\${_strata_component}_FOUND AND Strata_FIND_REQUIRED_\${_strata_component})
    set(Strata_FOUND FALSE)
    set(Strata_NOT_FOUND_MESSAGE "\${_strata_why}")
    unset(_strata_why)
    unset(_strata_component)
    unset(_strata_prefix)
    return()
  endif()
endforeach()
unset(_strata_why)
unset(_strata_component)
if(TARGET Strata::base)
  set(Strata_FOUND TRUE)
  return()
endif()
set(Strata_VERSION $version)
set(Strata_INCLUDE_DIRS "\${_strata_prefix}/include")

foreach(_strata_tier base full spidermonkey)
  add_library(Strata::\${_strata_tier} SHARED IMPORTED)
  set_target_properties(Strata::\${_strata_tier} PROPERTIES
    IMPORTED_LOCATION "\${_strata_prefix}/lib/libstrata_\${_strata_tier}.so.$version"
    IMPORTED_SONAME "libstrata_\${_strata_tier}.so.$soversion"
    INTERFACE_INCLUDE_DIRECTORIES "\${_strata_prefix}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endforeach()
set_property(TARGET Strata::full PROPERTY INTERFACE_LINK_LIBRARIES Strata::base)
set_property(TARGET Strata::spidermonkey PROPERTY INTERFACE_LINK_LIBRARIES Strata::full)
unset(_strata_tier)
unset(_strata_prefix)
set(Strata_FOUND TRUE)
EOF

cat >"$libdir/cmake/Strata/StrataConfigVersion.cmake" <<EOF
# Strata $version: any request for the same major version, not newer than this, matches; so
# does a request without a version.
set(PACKAGE_VERSION "$version")
if(NOT PACKAGE_FIND_VERSION)  # find_package(Strata) without a version: any.
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
elseif(PACKAGE_FIND_VERSION_MAJOR STREQUAL "$soversion" AND
   NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
else()
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
endif()
if(CMAKE_SIZEOF_VOID_P AND NOT CMAKE_SIZEOF_VOID_P STREQUAL "8")  # Unknown without a language.
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
endif()
EOF
chmod 0644 "$libdir"/pkgconfig/*.pc "$libdir"/cmake/Strata/*.cmake

echo "install: Strata $version in $prefix"
