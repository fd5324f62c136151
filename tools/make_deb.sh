#!/usr/bin/env bash
# Builds Strata's Debian packages from the install layout (docs/install.md): tools/install_tree.sh
# into a staging /usr, moved to Debian's places, then split as Debian splits its own libraries:
#
#   libstrata-base0          /usr/lib/<multiarch>/libstrata_base.so.<version>, .so.<soversion>
#   libstrata-full0          the full tier's runtime library (needs libstrata-base0)
#   libstrata-spidermonkey0  the SpiderMonkey tier and the `strata js` runner: the only package
#                            that needs libmozjs-102-0
#   libstrata-dev            headers, the unversioned .so links, pkg-config and CMake files
#                            (libabsl-dev: the public headers include abseil's)
#   strata                   the command line: /usr/bin/strata, its preload hook, strata.1 (made
#                            from `strata --help`), bash completion
#   strata-dbg               the detached debug files of all of them, /usr/lib/debug/.build-id/
#
# Each has /usr/share/doc/<package>/copyright and changelog.gz; the library packages have
# shlibs files and an ldconfig trigger. tests/install/deb_test.sh runs lintian on every one.
#
# Usage: tools/make_deb.sh [--build-root DIR] [OUTDIR]
#   Without --build-root it runs tools/setup.sh and `bazel build -c opt` (offline) first, as
#   tools/install.sh does; with it, DIR holds the built files (bazel-bin layout; tests).
#   The packages go to OUTDIR (default: the current directory); their paths are printed, one
#   per line, last. Install: apt-get install ./strata_*.deb ./libstrata-base0_*.deb ...
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

build_root=""
if [[ "${1:-}" == "--build-root" ]]; then
  build_root="$(cd "$2" && pwd)"
  shift 2
fi
out_dir="$(mkdir -p "${1:-.}" && cd "${1:-.}" && pwd)"
for tool in dpkg-deb dpkg-shlibdeps fakeroot patchelf gzip; do
  command -v "$tool" >/dev/null || { echo "make_deb: $tool not found (Debian dpkg-dev, fakeroot, patchelf)" >&2; exit 1; }
done

if [[ -z "$build_root" ]]; then
  (cd "$repo" && tools/setup.sh &&
   bazel build -c opt //base:libstrata_base.so //base:libstrata_alloc.so //full:libstrata_full.so \
     //full/script/spidermonkey:libstrata_spidermonkey.so //tools/strata:strata \
     //tools/strata:libstrata_record.so //tools/js:strata_js)
  build_root="$(cd "$repo" && bazel info -c opt bazel-bin 2>/dev/null)"
fi

version="$(tr -d ' \n' <"$repo/VERSION")"
soversion="${version%%.*}"
arch="$(dpkg --print-architecture)"
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"
# The Maintainer field: the project has no list address yet; set STRATA_DEB_MAINTAINER to one
# ("Name <address>") for packages that leave this machine.
maintainer="${STRATA_DEB_MAINTAINER:-Strata developers <maintainers@strata.invalid>}"
work="$(mktemp -d /tmp/strata-deb.XXXXXX)"
trap 'rm -rf "$work"' EXIT
tree="$work/tree"
ma="usr/lib/$multiarch"

# --- The installed tree, in Debian's places ---------------------------------------------------
bash "$repo/tools/install_tree.sh" --no-rpath-flags --final-prefix=/usr "$build_root" "$repo" "$tree/usr" >&2
# Under /usr the debug files are found by build-id in /usr/lib/debug; no lib/.debug/ links.
rm -rf "$tree/usr/lib/.debug"
mkdir -p "$tree/$ma/strata" "$tree/usr/lib/strata"
mv "$tree"/usr/lib/libstrata_base.so* "$tree"/usr/lib/libstrata_alloc.so* "$tree"/usr/lib/libstrata_full.so* "$tree"/usr/lib/libstrata_spidermonkey.so* "$tree/$ma/"
mv "$tree/usr/lib/pkgconfig" "$tree/usr/lib/cmake" "$tree/$ma/"
mv "$tree/usr/lib/libstrata_record.so" "$tree/usr/lib/strata/"
sed -i "s|^libdir=\${prefix}/lib\$|libdir=\${prefix}/lib/$multiarch|" "$tree/$ma"/pkgconfig/*.pc
sed -i -e 's|CMAKE_CURRENT_LIST_DIR}/../../..|CMAKE_CURRENT_LIST_DIR}/../../../..|' \
  -e "s|_strata_prefix}/lib/libstrata_|_strata_prefix}/lib/$multiarch/libstrata_|g" "$tree/$ma/cmake/Strata/StrataConfig.cmake"
# The loader finds the libraries in the multiarch directory: no search path of their own
# (Debian forbids one pointing elsewhere).
for elf in "$tree/$ma/libstrata_full.so.$version" "$tree/$ma/libstrata_alloc.so.$version" "$tree/$ma/libstrata_spidermonkey.so.$version"; do
  patchelf --remove-rpath "$elf"
done
if [[ -f "$tree/usr/bin/strata_js" ]]; then
  mv "$tree/usr/bin/strata_js" "$tree/$ma/strata/strata_js"  # Run by `strata js`, not a command.
  patchelf --remove-rpath "$tree/$ma/strata/strata_js"
fi

# --- strata.1 from --help, and bash completion --------------------------------------------------
strata="$tree/usr/bin/strata"
commands=(record symbolicate recover summary tree convert report view)
roff_escape() { sed -e 's/\\/\\e/g' -e 's/^\./\\\&./' -e "s/^'/\\\\\\&'/" -e 's/-/\\-/g'; }
mkdir -p "$tree/usr/share/man/man1"
{
  echo ".TH STRATA 1 \"$(date -u -d "@${SOURCE_DATE_EPOCH:-$(stat -c %Y "$repo/VERSION")}" +%Y-%m-%d)\" \"strata $version\" \"User Commands\""
  echo ".SH NAME"
  echo "strata \\- record, summarise, convert and view sampling profiles of C++ programs"
  echo ".SH SYNOPSIS"
  echo ".B strata"
  echo ".I COMMAND"
  echo "[\\fIOPTIONS\\fR]"
  echo ".SH DESCRIPTION"
  echo "This page is made from the program's own help (\\fBstrata \\-\\-help\\fR, \\fBstrata \\fICOMMAND\\fB \\-\\-help\\fR)."
  echo ".PP"
  echo ".nf"
  "$strata" --help | roff_escape
  echo ".fi"
  echo ".SH COMMANDS"
  for command in "${commands[@]}"; do
    echo ".SS strata $command"
    echo ".nf"
    "$strata" "$command" --help | roff_escape
    echo ".fi"
  done
  echo ".SH SEE ALSO"
  echo "The documentation in the Strata sources: docs/cli.md, docs/env-vars.md, docs/api.md."
} >"$tree/usr/share/man/man1/strata.1"
gzip -9n "$tree/usr/share/man/man1/strata.1"

mkdir -p "$tree/usr/share/bash-completion/completions"
{
  echo "# bash completion for strata $version (made from its --help by tools/make_deb.sh)"
  echo "_strata() {"
  echo "  local current=\${COMP_WORDS[COMP_CWORD]} command=\${COMP_WORDS[1]}"
  echo "  if [[ \$COMP_CWORD -eq 1 ]]; then"
  echo "    COMPREPLY=(\$(compgen -W '${commands[*]} js help --help --version' -- \"\$current\"))"
  echo "    return"
  echo "  fi"
  echo "  case \$command in"
  for command in "${commands[@]}"; do
    # The option lines of the help ("  -o,--output TEXT ..."), not its examples.
    options="$("$strata" "$command" --help | grep -E '^ +-' | sed 's/^ *//; s/ .*//' | tr ',' '\n' |
      grep -E '^--?[a-zA-Z]' | sort -u | tr '\n' ' ')"
    echo "    $command) [[ \$current == -* ]] && COMPREPLY=(\$(compgen -W '$options' -- \"\$current\")) || COMPREPLY=(\$(compgen -f -- \"\$current\")) ;;"
  done
  echo "  esac"
  echo "}"
  echo "complete -o filenames -F _strata strata"
} >"$tree/usr/share/bash-completion/completions/strata"

# --- Packages -------------------------------------------------------------------------------
changelog_date="$(date -u -R -d "@${SOURCE_DATE_EPOCH:-$(stat -c %Y "$repo/VERSION")}")"
mkdir -p "$work/shlibs/debian"
printf 'Source: strata\n\nPackage: strata\nArchitecture: %s\n' "$arch" >"$work/shlibs/debian/control"
printf 'libstrata_base %s libstrata-base0 (>= %s)\nlibstrata_full %s libstrata-full0 (>= %s)\nlibstrata_spidermonkey %s libstrata-spidermonkey0 (>= %s)\n' \
  "$soversion" "$version" "$soversion" "$version" "$soversion" "$version" >"$work/shlibs/debian/shlibs.local"

# make_package NAME SECTION MULTI_ARCH DEPENDS SHORT LONG PATH...: one .deb with PATHs of the
# tree (files, links, directories), its documentation files and control files.
built=()
make_package() {
  local name="$1" section="$2" multi_arch="$3" depends="$4" short="$5" long="$6"
  shift 6
  local stage="$work/pkg/$name"
  mkdir -p "$stage"
  (cd "$tree" && cp -a --parents "$@" "$stage/")
  local doc="$stage/usr/share/doc/$name"
  mkdir -p "$doc"
  cat >"$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: strata
Comment: Strata, an in-process sampling profiler for C++ programs on Linux, version $version.
 The binaries link Debian's libraries dynamically; their terms are in their own packages'
 copyright files. No third-party code is copied into these files.

Files: *
Copyright: $(date -u -d "@${SOURCE_DATE_EPOCH:-$(stat -c %Y "$repo/VERSION")}" +%Y) the Strata developers
License: unpublished
 The Strata developers have not published a license for Strata yet. Until they do,
 this package may be used, but no permission to copy, modify or redistribute it is
 granted beyond what the law allows without one.
EOF
  printf 'strata (%s) unstable; urgency=medium\n\n  * Release %s: the Debian packages split per library (issue 39).\n\n -- %s  %s\n' \
    "$version" "$version" "$maintainer" "$changelog_date" | gzip -9n >"$doc/changelog.gz"
  local elf_files=()
  while IFS= read -r -d '' file; do
    if [[ ! -L "$file" ]] && head -c 4 "$file" | grep -q $'\x7fELF' && [[ "$file" != */usr/lib/debug/* ]]; then
      elf_files+=("$file")
    fi
  done < <(find "$stage" -type f -print0)
  local shlib_depends=""
  if ((${#elf_files[@]} > 0)); then
    shlib_depends="$(cd "$work/shlibs" && dpkg-shlibdeps -O -x"$name" -l"$tree/$ma" "${elf_files[@]}" 2>/dev/null |
      sed -n 's/^shlibs:Depends=//p')"
    [[ -n "$shlib_depends" ]] || { echo "make_deb: dpkg-shlibdeps found no dependencies for $name" >&2; exit 1; }
  fi
  local all_depends="$shlib_depends"
  [[ -n "$depends" ]] && all_depends="${all_depends:+$all_depends, }$depends"
  mkdir -p "$stage/DEBIAN"
  {
    echo "Package: $name"
    echo "Source: strata"
    echo "Version: $version"
    echo "Architecture: $arch"
    [[ -n "$multi_arch" ]] && echo "Multi-Arch: $multi_arch"
    echo "Maintainer: $maintainer"
    echo "Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)"
    [[ -n "$all_depends" ]] && echo "Depends: $all_depends"
    [[ "$name" == libstrata-dev ]] && echo "Suggests: libstrata-spidermonkey0 (= $version)"
    echo "Section: $section"
    echo "Priority: optional"
    echo "Description: $short"
    printf '%s\n' "$long" | fold -s -w 72 | sed 's/ *$//; s/^/ /'
  } >"$stage/DEBIAN/control"
  if compgen -G "$stage/$ma/libstrata_*.so.$version" >/dev/null; then
    local library
    for library in "$stage/$ma"/libstrata_*.so."$version"; do
      library="$(basename "$library" ".so.$version")"
      echo "$library $soversion $name (>= $version)" >>"$stage/DEBIAN/shlibs"
    done
    echo "activate-noawait ldconfig" >"$stage/DEBIAN/triggers"
  fi
  (cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
  chmod 0644 "$stage"/DEBIAN/*
  find "$stage" -type d -exec chmod 0755 {} +
  local deb="$out_dir/${name}_${version}_${arch}.deb"
  fakeroot dpkg-deb --root-owner-group --build -Zxz "$stage" "$deb" >&2
  built+=("$deb")
}

about="Strata samples native stacks (and SpiderMonkey JS stacks) with per-thread CPU-time
sampling, and records labels, markers and counters into Gecko profiles that the Firefox
Profiler opens."
make_package libstrata-base0 libs same "libunwind8" \
  "in-process sampling profiler for C++ - base library" \
  "$about This package has the base tier's runtime library, which a program links or which is preloaded into any program (strata record), and the allocation hooks of the nativeallocations feature." \
  "$ma/libstrata_base.so.$version" "$ma/libstrata_base.so.$soversion" \
  "$ma/libstrata_alloc.so.$version" "$ma/libstrata_alloc.so.$soversion"
make_package libstrata-full0 libs same "" \
  "in-process sampling profiler for C++ - full tier library" \
  "$about This package has the full tier: taking over a base session, child processes in one session, the performance monitor." \
  "$ma/libstrata_full.so.$version" "$ma/libstrata_full.so.$soversion"
spidermonkey_paths=("$ma/libstrata_spidermonkey.so.$version" "$ma/libstrata_spidermonkey.so.$soversion")
[[ -f "$tree/$ma/strata/strata_js" ]] && spidermonkey_paths+=("$ma/strata/strata_js")
make_package libstrata-spidermonkey0 libs same "" \
  "in-process sampling profiler for C++ - SpiderMonkey JS stacks" \
  "$about This package has the SpiderMonkey 102 tier (JS stacks in the profile) and the runner of strata js." \
  "${spidermonkey_paths[@]}"
make_package libstrata-dev libdevel "" "libstrata-base0 (= $version), libstrata-full0 (= $version), libabsl-dev" \
  "in-process sampling profiler for C++ - development files" \
  "$about This package has the headers, the pkg-config files (strata-base, strata-full, strata-spidermonkey) and the CMake package (find_package(Strata))." \
  usr/include/strata "$ma/libstrata_base.so" "$ma/libstrata_alloc.so" "$ma/libstrata_full.so" "$ma/libstrata_spidermonkey.so" \
  "$ma/pkgconfig" "$ma/cmake"
make_package strata devel "" "libstrata-base0 (= $version)" \
  "in-process sampling profiler for C++ - command line" \
  "$about This package has the strata command: record a program and every process it starts, summary, call tree, convert (Chrome trace, pprof, collapsed stacks), HTML report, and view in the Firefox Profiler." \
  usr/bin/strata usr/lib/strata usr/share/man usr/share/bash-completion
make_package strata-dbg debug "" "libstrata-base0 (= $version)" \
  "in-process sampling profiler for C++ - debug symbols" \
  "$about This package has the detached debug information of the libraries, the strata command and its helpers, found by build-id under /usr/lib/debug." \
  usr/lib/debug
printf '%s\n' "${built[@]}"
