#!/usr/bin/env bash
# The Debian package (issue 19; docs/install.md): tools/make_deb.sh builds
# strata_VERSION_amd64.deb from this build's files; `dpkg-deb --info` shows the package, its
# version, amd64 and the Debian packages the libraries need (dpkg-shlibdeps, plus libunwind8,
# dlopened, and libabsl-dev, whose headers the public headers include); `dpkg-deb --contents`
# lists the install layout under /usr and nothing else; the extracted pkg-config files name
# /usr and carry no -rpath. (Installing it system-wide is left to a person: see
# docs/install.md for the check done by hand.)
source "$(dirname "$0")/../scenario_lib.sh"

version="$(tr -d ' \n' <"$_runfiles/VERSION")"
if ! timeout 300 bash "$_runfiles/tools/make_deb.sh" --build-root "$_runfiles" "$WORK/deb" \
    >"$WORK/deb.out" 2>"$WORK/deb.err"; then
  fail "make_deb.sh failed:"
  sed 's/^/    /' "$WORK/deb.err" | tail -30
  finish
fi
deb="$(tail -1 "$WORK/deb.out")"
[[ "$deb" == "$WORK/deb/strata_${version}_amd64.deb" && -f "$deb" ]] ||
  { fail "make_deb.sh printed '$deb', expected $WORK/deb/strata_${version}_amd64.deb"; finish; }
result "deb_bytes=$(stat -c %s "$deb")"

info="$(dpkg-deb --info "$deb")"
field_of() { dpkg-deb --field "$deb" "$1"; }
[[ "$(field_of Package)" == strata ]] || fail "Package is '$(field_of Package)'"
[[ "$(field_of Version)" == "$version" ]] || fail "Version is '$(field_of Version)', expected $version"
[[ "$(field_of Architecture)" == amd64 ]] || fail "Architecture is '$(field_of Architecture)'"
depends="$(field_of Depends)"
echo "Depends: $depends"
for package in libc6 libstdc++6 libgcc-s1 libdw1 libelf1 zlib1g libmozjs-102-0 libunwind8 libabsl-dev; do
  sed 's/, /\n/g; s/ ([^)]*)//g' <<<"$depends" | grep -qxF "$package" || fail "Depends lacks $package"
done
grep -q 'strata' <<<"$depends" && fail "the package depends on itself: $depends"
grep -q 'activate-noawait ldconfig' <<<"$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./triggers)" ||
  fail "no ldconfig trigger"
grep -q '^ Description: ' <<<"$info" || fail "no Description"

contents="$(dpkg-deb --contents "$deb" | awk '{ print $6 ($7 == "->" ? " -> " $8 : "") }')"
for path in ./usr/bin/strata ./usr/bin/strata_js "./usr/lib/libstrata_base.so.$version" \
    "./usr/lib/libstrata_full.so.$version" "./usr/lib/libstrata_spidermonkey.so.$version" \
    "./usr/lib/libstrata_base.so.${version%%.*} -> libstrata_base.so.$version" \
    "./usr/lib/libstrata_base.so -> libstrata_base.so.${version%%.*}" \
    ./usr/lib/libstrata_record.so ./usr/include/strata/markers.h ./usr/include/strata/full.h \
    ./usr/lib/pkgconfig/strata-base.pc ./usr/lib/pkgconfig/strata-full.pc \
    ./usr/lib/pkgconfig/strata-spidermonkey.pc ./usr/lib/cmake/Strata/StrataConfig.cmake \
    ./usr/lib/cmake/Strata/StrataConfigVersion.cmake; do
  grep -qxF "$path" <<<"$contents" || fail "the package lacks $path"
done
debug_files=$(grep -cE '^\./usr/lib/debug/\.build-id/[0-9a-f]{2}/[0-9a-f]+\.debug$' <<<"$contents")
[[ $debug_files -eq 6 ]] || fail "$debug_files debug files under /usr/lib/debug/.build-id (6 expected)"
if grep -vE '^\./(usr/?)?$|^\./usr/(bin|include/strata|lib/(libstrata_|pkgconfig|cmake|debug)|share/doc/strata)' <<<"$contents" |
    grep -vxE '\./usr/(include|lib|share|share/doc)/'; then
  fail "the package has files outside the install layout (above)"
fi
pass "dpkg-deb --info and --contents: $(wc -l <<<"$contents") entries, $debug_files debug files"

dpkg-deb -x "$deb" "$WORK/root"
pc="$WORK/root/usr/lib/pkgconfig/strata-full.pc"
grep -qx 'prefix=/usr' "$pc" || fail "strata-full.pc does not name /usr: $(grep '^prefix' "$pc")"
grep -q 'rpath' "$WORK"/root/usr/lib/pkgconfig/*.pc && fail "a .pc file of the package carries an rpath"
readelf -dW "$WORK/root/usr/lib/libstrata_full.so.$version" | grep -q 'NEEDED.*\[libstrata_base.so.0\]' ||
  fail "the packaged libstrata_full.so does not need libstrata_base.so.0"
finish
