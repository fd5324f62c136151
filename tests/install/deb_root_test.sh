#!/usr/bin/env bash
# The .deb on a fresh container-like root (issue 19; docs/install.md). Manual: it needs root,
# the Debian mirror (debootstrap and apt-get download ~100 MB) and several minutes, so CI does
# not run it; run it by hand:
#   bazel test //tests/install:deb_root_test --test_output=streamed
# STRATA_DEB_ROOT_TARBALL=FILE reuses (or, if missing, saves) the debootstrap tarball.
#
#   1. tools/make_deb.sh builds the packages (libstrata-base0, libstrata-full0,
#      libstrata-spidermonkey0, libstrata-dev, strata, strata-dbg) from this build's files.
#   2. debootstrap --variant=minbase bookworm: a fresh Debian root with no compiler, no
#      Strata, none of its dependencies; entered with chroot in a private mount namespace
#      (/proc, /dev bound for apt and the profiler).
#   3. `apt-get install ./strata_*.deb ./libstrata-dev_*.deb ./libstrata-full0_*.deb
#      ./libstrata-base0_*.deb` in it: the packages and their dependencies from the Debian
#      mirror; `dpkg -s strata` says installed, and libmozjs-102-0 is not installed (only
#      libstrata-spidermonkey0 needs it).
#   4. From another directory (/var/tmp, nothing of Strata there): `strata record -o … --
#      /bin/true` writes a profile; `strata summary` reads it.
#   5. g++, make and pkgconf installed; examples/make's program built with
#      `pkg-config --cflags --libs strata-full` alone (nothing else on the command line), run
#      with STRATA_STARTUP=1 / STRATA_SHUTDOWN: a profile with ExampleBusyWork.
#   6. `dpkg -r` of the four: every file they installed is gone, `dpkg -s strata` says not
#      installed (config-files or nothing), the dependencies' files stay.
source "$(dirname "$0")/../scenario_lib.sh"

if [[ $(id -u) -ne 0 ]]; then fail "needs root (debootstrap, chroot)"; finish; fi
for tool in debootstrap unshare chroot; do
  command -v "$tool" >/dev/null || { fail "$tool not found (apt-get install debootstrap)"; finish; }
done

version="$(tr -d ' \n' <"$_runfiles/VERSION")"
if ! timeout 300 bash "$_runfiles/tools/make_deb.sh" --build-root "$_runfiles" "$WORK/deb" \
    >"$WORK/deb.out" 2>"$WORK/deb.err"; then
  fail "make_deb.sh failed:"; sed 's/^/    /' "$WORK/deb.err" | tail -30; finish
fi
packages=(strata libstrata-dev libstrata-full0 libstrata-base0)
debs=()
for package in "${packages[@]}"; do debs+=("$(grep "/${package}_[^/]*\.deb\$" "$WORK/deb.out")"); done
pass "built $(for deb in "${debs[@]}"; do basename "$deb"; done | tr '\n' ' ')"

ROOT="$(mktemp -d /var/tmp/strata-deb-root.XXXXXX)"
cleanup() { rm -rf --one-file-system "$ROOT"; }
trap cleanup EXIT
mirror=http://deb.debian.org/debian
tarball="${STRATA_DEB_ROOT_TARBALL:-}"
if [[ -n "$tarball" && -f "$tarball" ]]; then
  boot=(debootstrap --variant=minbase --unpack-tarball="$tarball" bookworm "$ROOT" "$mirror")
elif [[ -n "$tarball" ]]; then
  timeout 900 debootstrap --variant=minbase --make-tarball="$tarball" bookworm "$ROOT/tmp-tar" "$mirror" \
    >"$WORK/debootstrap-tar.log" 2>&1 || { fail "debootstrap --make-tarball failed"; tail -5 "$WORK/debootstrap-tar.log"; finish; }
  rm -rf "$ROOT/tmp-tar"
  boot=(debootstrap --variant=minbase --unpack-tarball="$tarball" bookworm "$ROOT" "$mirror")
else
  boot=(debootstrap --variant=minbase bookworm "$ROOT" "$mirror")
fi
if timeout 900 "${boot[@]}" >"$WORK/debootstrap.log" 2>&1; then
  pass "debootstrap --variant=minbase bookworm: a fresh root ($(du -sm "$ROOT" | cut -f1) MB)"
else
  fail "debootstrap failed:"; tail -10 "$WORK/debootstrap.log" | sed 's/^/    /'; finish
fi
for absent in /usr/bin/g++ /usr/bin/pkg-config /usr/lib/x86_64-linux-gnu/libunwind.so.8 /usr/bin/strata; do
  [[ -e "$ROOT$absent" ]] && fail "the fresh root already has $absent"
done
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp "${debs[@]}" "$ROOT/tmp/"
cp -rL "$_runfiles/examples/make" "$ROOT/tmp/example"

# in_root SCRIPT: runs SCRIPT with bash in the root, in a private mount namespace.
in_root() {
  timeout 900 unshare --mount --fork bash -c '
    set -e
    mount --make-rprivate /
    mount -t proc proc "$1/proc"
    mount --rbind /dev "$1/dev"
    exec chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
      DEBIAN_FRONTEND=noninteractive /bin/bash -c "$2"' in_root "$ROOT" "$1"
}

in_root_debs="$(for deb in "${debs[@]}"; do printf '/tmp/%s ' "$(basename "$deb")"; done)"
if in_root "apt-get update -q && apt-get install -y -q --no-install-recommends $in_root_debs" \
    >"$WORK/install.log" 2>&1 &&
   in_root "dpkg -s strata" 2>/dev/null | grep -qx 'Status: install ok installed'; then
  pass "apt-get install of ${packages[*]} on the fresh root: $(grep -cE '^(Setting up|Unpacking) ' "$WORK/install.log") unpack/setup steps"
else
  fail "apt-get install of the packages failed:"; tail -15 "$WORK/install.log" | sed 's/^/    /'; finish
fi
in_root "dpkg -s libmozjs-102-0" 2>/dev/null | grep -q 'install ok installed' &&
  fail "libmozjs-102-0 was installed: only libstrata-spidermonkey0 may need it"
in_root "dpkg -L ${packages[*]}" >"$WORK/files.txt" 2>/dev/null
in_root "cd /var/tmp && strata record -o /var/tmp/true.json -- /bin/true && strata summary /var/tmp/true.json" \
  >"$WORK/record.log" 2>&1
if [[ -s "$ROOT/var/tmp/true.json" ]] && grep -q '^Profile of' "$WORK/record.log"; then
  pass "strata record -- /bin/true from /var/tmp: $(stat -c %s "$ROOT/var/tmp/true.json") bytes, summary reads it"
else
  fail "strata record -- /bin/true on the installed package:"; tail -10 "$WORK/record.log" | sed 's/^/    /'
fi

build='cd /tmp/example && g++ -std=c++17 -O2 -DSTRATA_EXAMPLE_FULL strata_example.cc -o strata_example_full $(pkg-config --cflags --libs strata-full)'
if in_root "apt-get install -y -q --no-install-recommends g++ make pkgconf" >"$WORK/toolchain.log" 2>&1 &&
   in_root "$build" >"$WORK/build.log" 2>&1; then
  pass "the example builds with pkg-config --cflags --libs strata-full alone: $(in_root 'pkg-config --cflags --libs strata-full')"
  in_root "cd /var/tmp && STRATA_STARTUP=1 STRATA_SHUTDOWN=/var/tmp/example.json /tmp/example/strata_example_full" \
    >"$WORK/example.log" 2>&1
  if [[ -s "$ROOT/var/tmp/example.json" ]] && grep -q 'ExampleBusyWork' "$ROOT/var/tmp/example.json"; then
    pass "the example runs: profile with ExampleBusyWork ($(stat -c %s "$ROOT/var/tmp/example.json") bytes)"
    cp "$ROOT/var/tmp/example.json" "$OUT/example.json"
    check_format example
  else
    fail "the example's profile is missing or lacks ExampleBusyWork:"; tail -10 "$WORK/example.log" | sed 's/^/    /'
  fi
else
  fail "the example did not build in the root:"; tail -n 15 "$WORK/toolchain.log" "$WORK/build.log" | sed 's/^/    /'
fi

in_root "dpkg -r ${packages[*]}" >"$WORK/remove.log" 2>&1 || { fail "dpkg -r failed"; tail -5 "$WORK/remove.log"; }
status="$(in_root "dpkg-query -W -f='\${Status}' strata" 2>/dev/null || true)"
left=0
while read -r path; do
  [[ -z "$path" || -d "$ROOT$path" ]] && continue
  if [[ -e "$ROOT$path" || -L "$ROOT$path" ]]; then left=$((left + 1)); echo "    left behind: $path"; fi
done <"$WORK/files.txt"
if [[ $left -eq 0 && "$status" != *"install ok installed"* ]] &&
   [[ -e "$ROOT/usr/lib/x86_64-linux-gnu/libunwind.so.8" ]]; then
  pass "dpkg -r ${packages[*]}: all $(grep -c . "$WORK/files.txt") listed paths' files gone, status '${status:-not installed}', dependencies kept"
else
  fail "dpkg -r ${packages[*]}: $left files left, status '$status'"
fi
finish
