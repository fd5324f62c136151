#!/usr/bin/env bash
# The Debian packages (issues 19 and 39; docs/install.md): tools/make_deb.sh builds them from
# this build's files, split as Debian splits its own libraries. Checked without installing
# them (tests/install/deb_root_test.sh installs and removes them in a fresh root, by hand):
#   - six packages: libstrata-base0, libstrata-full0, libstrata-spidermonkey0, libstrata-dev,
#     strata, strata-dbg; version, architecture, a maintainer that is not example.org, no
#     Homepage of another project;
#   - dependencies: only libstrata-spidermonkey0 needs libmozjs-102-0; only libstrata-dev
#     needs libabsl-dev; libstrata-base0 needs libunwind8 (dlopened); the others need the
#     Strata libraries they link; strata needs libstrata-base0 (record preloads it);
#   - contents: the runtime libraries in /usr/lib/<multiarch>, the debug files (7) only in
#     strata-dbg, headers, .so links, pkg-config and CMake files only in libstrata-dev,
#     strata.1 and bash completion in strata; copyright and changelog.gz in every package;
#   - lintian: 0 errors on every package (Debian's lintian, installed by tools/setup.sh);
#   - extracted together: the pkg-config files name /usr/lib/<multiarch>; CMake finds
#     Strata with COMPONENTS base full spidermonkey from the extracted tree (the relocated
#     prefix); strata.1 renders without a groff warning; the completion completes a command
#     and an option; the extracted `strata record` finds its libraries in the multiarch
#     directory and profiles /bin/true; `strata js --help` finds its runner there.
source "$(dirname "$0")/../scenario_lib.sh"

version="$(tr -d ' \n' <"$_runfiles/VERSION")"
arch="$(dpkg --print-architecture)"
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"
if ! timeout 600 bash "$_runfiles/tools/make_deb.sh" --build-root "$_runfiles" "$WORK/deb" \
    >"$WORK/deb.out" 2>"$WORK/deb.err"; then
  fail "make_deb.sh failed:"
  sed 's/^/    /' "$WORK/deb.err" | tail -30
  finish
fi
packages=(libstrata-base0 libstrata-full0 libstrata-spidermonkey0 libstrata-dev strata strata-dbg)
declare -A deb=()
for package in "${packages[@]}"; do
  deb[$package]="$WORK/deb/${package}_${version}_${arch}.deb"
  grep -qxF "${deb[$package]}" "$WORK/deb.out" && [[ -f "${deb[$package]}" ]] ||
    fail "make_deb.sh did not print or build ${deb[$package]}"
done
[[ $(grep -c '\.deb$' "$WORK/deb.out") == "${#packages[@]}" ]] || fail "make_deb.sh printed: $(cat "$WORK/deb.out")"
result "deb_bytes $(for p in "${packages[@]}"; do printf '%s=%s ' "$p" "$(stat -c %s "${deb[$p]}" 2>/dev/null)"; done)"

# --- Control fields -------------------------------------------------------------------------
field_of() { dpkg-deb --field "${deb[$1]}" "$2"; }
depends_of() { field_of "$1" Depends | sed 's/, /\n/g; s/ ([^)]*)//g'; }
for package in "${packages[@]}"; do
  [[ "$(field_of "$package" Package)" == "$package" && "$(field_of "$package" Version)" == "$version" &&
     "$(field_of "$package" Architecture)" == "$arch" ]] || fail "$package: Package/Version/Architecture"
  field_of "$package" Maintainer | grep -q 'example\.org' && fail "$package: Maintainer at example.org"
  field_of "$package" Homepage | grep -q 'firefox' && fail "$package: Homepage of another project"
  depends_of "$package" | grep -qx 'libmozjs-102-0' && [[ $package != libstrata-spidermonkey0 ]] &&
    fail "$package depends on libmozjs-102-0"
  depends_of "$package" | grep -qx 'libabsl-dev' && [[ $package != libstrata-dev ]] && fail "$package depends on libabsl-dev"
done
# requires PACKAGE DEPENDENCY...
requires() {
  local package="$1" dependency
  shift
  for dependency in "$@"; do
    depends_of "$package" | grep -qxF "$dependency" || fail "$package: Depends lacks $dependency ($(field_of "$package" Depends))"
  done
}
requires libstrata-base0 libc6 libunwind8
requires libstrata-full0 libstdc++6 libstrata-base0
requires libstrata-spidermonkey0 libmozjs-102-0 libstrata-full0
requires libstrata-dev libstrata-base0 libstrata-full0 libabsl-dev
requires strata libdw1 zlib1g libstrata-base0
requires strata-dbg libstrata-base0
for package in "${packages[@]}"; do echo "    $package: Depends: $(field_of "$package" Depends)"; done
for package in libstrata-base0 libstrata-full0 libstrata-spidermonkey0; do
  [[ "$(field_of "$package" Multi-Arch)" == same ]] || fail "$package: not Multi-Arch: same"
  dpkg-deb --ctrl-tarfile "${deb[$package]}" | tar -xO ./triggers 2>/dev/null | grep -q 'activate-noawait ldconfig' ||
    fail "$package: no ldconfig trigger"
  dpkg-deb --ctrl-tarfile "${deb[$package]}" | tar -xO ./shlibs 2>/dev/null | grep -q "^libstrata_.* ${version%%.*} $package " ||
    fail "$package: no shlibs entry"
done
pass "control fields: versions, dependencies (libmozjs-102-0 only for libstrata-spidermonkey0), shlibs, triggers"

# --- Contents -------------------------------------------------------------------------------
contents_of() { dpkg-deb --contents "${deb[$1]}" | awk '{ print $6 ($7 == "->" ? " -> " $8 : "") }'; }
# has PACKAGE PATH...
has() {
  local package="$1" path
  shift
  for path in "$@"; do contents_of "$package" | grep -qxF "$path" || fail "$package lacks $path"; done
}
ma="./usr/lib/$multiarch"
has libstrata-base0 "$ma/libstrata_base.so.$version" "$ma/libstrata_base.so.${version%%.*} -> libstrata_base.so.$version" \
  "$ma/libstrata_alloc.so.$version" "$ma/libstrata_alloc.so.${version%%.*} -> libstrata_alloc.so.$version"
has libstrata-full0 "$ma/libstrata_full.so.$version"
has libstrata-spidermonkey0 "$ma/libstrata_spidermonkey.so.$version" "$ma/strata/strata_js"
has libstrata-dev ./usr/include/strata/markers.h ./usr/include/strata/full.h \
  "$ma/libstrata_base.so -> libstrata_base.so.${version%%.*}" "$ma/pkgconfig/strata-base.pc" \
  "$ma/pkgconfig/strata-full.pc" "$ma/cmake/Strata/StrataConfig.cmake"
has strata ./usr/bin/strata ./usr/lib/strata/libstrata_record.so ./usr/share/man/man1/strata.1.gz \
  ./usr/share/bash-completion/completions/strata
for package in "${packages[@]}"; do
  has "$package" "./usr/share/doc/$package/copyright" "./usr/share/doc/$package/changelog.gz"
  debug=$(contents_of "$package" | grep -cE '^\./usr/lib/debug/\.build-id/[0-9a-f]{2}/[0-9a-f]+\.debug$')
  if [[ $package == strata-dbg ]]; then
    [[ $debug -eq 7 ]] || fail "strata-dbg has $debug debug files (7 expected)"
  else
    [[ $debug -eq 0 ]] || fail "$package has $debug debug files"
    contents_of "$package" | grep -q '^\./usr/lib/libstrata' && fail "$package has a library outside /usr/lib/$multiarch"
  fi
  if [[ $package != libstrata-dev ]]; then
    contents_of "$package" | grep -qE '^\./usr/include/.|\.pc$|cmake/' && fail "$package has development files"
  fi
done
pass "contents: libraries in /usr/lib/$multiarch, debug files in strata-dbg only, copyright and changelog everywhere"

# --- lintian ----------------------------------------------------------------------------------
if command -v lintian >/dev/null; then
  timeout 900 lintian --tag-display-limit 0 "${deb[@]}" >"$WORK/lintian.txt" 2>&1
  sed 's/^/    /' "$WORK/lintian.txt" | grep -v 'root privileges' | head -40
  errors=$(grep -c '^E: ' "$WORK/lintian.txt")
  warnings=$(grep -c '^W: ' "$WORK/lintian.txt")
  result "lintian errors=$errors warnings=$warnings"
  [[ $errors -eq 0 ]] && pass "lintian: 0 errors, $warnings warnings on the ${#packages[@]} packages" ||
    fail "lintian: $errors errors (above)"
else
  fail "lintian is not installed (apt-get install lintian; tools/setup.sh)"
fi

# --- Extracted together -------------------------------------------------------------------------
root="$WORK/root"
for package in "${packages[@]}"; do dpkg-deb -x "${deb[$package]}" "$root"; done
pc="$root/usr/lib/$multiarch/pkgconfig/strata-full.pc"
grep -qx 'prefix=/usr' "$pc" && grep -qx "libdir=\${prefix}/lib/$multiarch" "$pc" && ! grep -q rpath "$pc" \
  && pass "strata-full.pc: prefix /usr, libdir /usr/lib/$multiarch, no rpath" || fail "strata-full.pc: $(cat "$pc")"
readelf -dW "$root/usr/lib/$multiarch/libstrata_full.so.$version" | grep -q 'NEEDED.*\[libstrata_base.so.0\]' ||
  fail "the packaged libstrata_full.so does not need libstrata_base.so.0"
readelf -dW "$root/usr/lib/$multiarch/libstrata_full.so.$version" | grep -qE 'RPATH|RUNPATH' &&
  fail "the packaged libstrata_full.so has a search path of its own"
mkdir -p "$WORK/cmake"
cat >"$WORK/cmake/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(packaged CXX)
find_package(Strata REQUIRED COMPONENTS base full spidermonkey)
get_target_property(location Strata::full IMPORTED_LOCATION)
message(STATUS "Strata::full at ${location}")
CMAKE
if timeout 300 cmake -S "$WORK/cmake" -B "$WORK/cmake/build" -DCMAKE_PREFIX_PATH="$root/usr" >"$WORK/cmake.log" 2>&1 &&
   grep -qF "Strata::full at $root/usr/lib/$multiarch/libstrata_full.so.$version" "$WORK/cmake.log"; then
  pass "CMake finds Strata (base, full, spidermonkey) in the extracted packages, at /usr/lib/$multiarch"
else
  fail "CMake on the extracted packages: $(tail -8 "$WORK/cmake.log")"
fi
zcat "$root/usr/share/man/man1/strata.1.gz" >"$WORK/strata.1"
LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$WORK/strata.1" >"$WORK/man.txt" 2>"$WORK/man.err"
grep -q 'strata record' "$WORK/man.txt" && grep -q -- '--follow' "$WORK/man.txt" && [[ ! -s "$WORK/man.err" ]] \
  && pass "strata.1 renders without a warning, with every command's options" \
  || fail "strata.1: $(head -5 "$WORK/man.err")"
completions=$(bash -c 'source "$1"; COMP_WORDS=(strata tr); COMP_CWORD=1; _strata; echo "${COMPREPLY[*]}";
  COMP_WORDS=(strata record --fol); COMP_CWORD=2; _strata; echo "${COMPREPLY[*]}"' _ "$root/usr/share/bash-completion/completions/strata")
[[ "$completions" == $'tree\n--follow' ]] && pass "bash completion: 'strata tr' -> tree, 'strata record --fol' -> --follow" \
  || fail "bash completion: '$completions'"
# (SANITIZER_ENV: a sanitizer build's runtime first in /bin/true, scenario_lib.sh.)
STRATA_NO_PROGRESS=1 timeout 120 env "${SANITIZER_ENV[@]}" "$root/usr/bin/strata" record -q \
  -o "$OUT/true.json" -- /bin/true >"$WORK/record.log" 2>&1
status=$?
[[ $status == 0 && -s "$OUT/true.json" ]] \
  && pass "the packaged strata record finds libstrata_base.so.0 in /usr/lib/$multiarch and its hook, and records /bin/true" \
  || fail "the packaged strata record: status $status: $(cat "$WORK/record.log")"
LD_LIBRARY_PATH="$root/usr/lib/$multiarch" timeout 60 "$root/usr/bin/strata" js --help >"$WORK/js.log" 2>&1 \
  && pass "strata js finds its runner in /usr/lib/$multiarch/strata" || fail "strata js --help: $(head -3 "$WORK/js.log")"
finish
